//! Authenticated callers kept per API process, so that a request whose
//! credential and Workspace header were seen a moment ago skips the round trip
//! that authenticates it.
//!
//! - An entry is found by the SHA-256 of the bearer credential and the
//!   `Svc-Workspace` header: a secret is never kept in plain form, and an entry
//!   answers only the exact credential and selection it was made for, so no
//!   caller is shared across credentials or tenants.
//! - Only successful authentications are kept; every refusal is decided anew.
//!   A User's token is still verified on every request (its own cache keeps
//!   that cheap), so expiry and key-set changes act at once.
//! - PostgreSQL tells every API process when anything a caller is made of
//!   changes (triggers on `api_keys`, `users`, `memberships` and `workspaces`
//!   notify `caller_changed`, migration 0015); everything kept is dropped then.
//!   Those changes are rare (revocations, role and plan changes, archiving),
//!   so dropping everything is simple and costs little.
//! - Until this process listens, nothing is kept or used, and a lost listener
//!   drops everything (fail safe), as the wait cache does.
//! - An entry is used for a short time at most (`SVC_CALLER_CACHE_MAX_AGE_MS`,
//!   one second by default), counted from the start of its read: should
//!   notifications stop without the connection failing, a revoked credential
//!   still stops working within that time. The full authentication that
//!   follows also touches the key's `lastUsedAt`.
//! - A read that raced a notification is not kept: an entry is stored only if
//!   no notification arrived between the start of its read and its storing.
//! - At most about `SVC_CALLER_CACHE_ENTRIES` callers are kept; when full,
//!   expired entries go, and a new one is not kept if none has.
//!
//! The keeping itself is [`ListenCache`]'s, which the wait cache shares.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::caller::Caller;
use crate::listen_cache::{self, Figures, ListenCache};

/// The channel migration 0015's triggers notify.
pub const CHANNEL: &str = "caller_changed";

/// What an entry is found by: the SHA-256 of the credential and the Workspace
/// header, never the credential itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub fn of(credential: &str, workspace: Option<&str>) -> Self {
        let mut hash = Sha256::new();
        // Lengths first: no two (credential, header) pairs hash the same input.
        hash.update((credential.len() as u64).to_le_bytes());
        hash.update(credential.as_bytes());
        match workspace {
            None => hash.update([0]),
            Some(header) => {
                hash.update([1]);
                hash.update(header.as_bytes());
            }
        }
        Self(hash.finalize().into())
    }
}

impl listen_cache::Key for Fingerprint {
    fn spread(&self) -> usize {
        usize::from(self.0[0])
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fingerprint(..)")
    }
}

/// Taken before an authentication whose caller may be kept.
pub type Ticket = listen_cache::Ticket<Fingerprint>;

pub struct CallerCache {
    kept: ListenCache<Fingerprint, Arc<Caller>>,
}

impl CallerCache {
    /// The longest an entry is used without news from PostgreSQL, by default.
    pub const MAX_AGE: Duration = Duration::from_secs(1);

    /// A cache of at most about `capacity` callers (0 keeps nothing), each
    /// used for at most `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self { kept: ListenCache::new(capacity, max_age) }
    }

    /// Whether it keeps nothing, ever (a capacity of 0).
    pub fn is_off(&self) -> bool {
        self.kept.is_off()
    }

    /// The kept caller for `fingerprint`, if fresh.
    pub fn get(&self, fingerprint: &Fingerprint) -> Option<Arc<Caller>> {
        self.kept.get(fingerprint, |caller| Some(caller.clone()))
    }

    /// Call before authenticating from PostgreSQL; `None` when nothing may be kept.
    pub fn ticket(&self, fingerprint: Fingerprint) -> Option<Ticket> {
        self.kept.ticket(fingerprint)
    }

    /// Keeps `caller`, authenticated after `ticket` was taken, unless a
    /// notification arrived since (the read may predate the change it
    /// announced) or the cache is full of fresh entries.
    pub fn keep(&self, ticket: Ticket, caller: Arc<Caller>) {
        self.kept.keep(ticket, caller);
    }

    /// Forgets every caller; a read begun before is not kept after.
    pub fn clear(&self) {
        self.kept.clear();
    }

    /// A notification: something callers are made of changed.
    pub fn changed(&self) {
        self.clear();
    }

    /// Listening: from now on every change is heard, so callers may be kept.
    pub fn listening(&self) {
        self.kept.listening();
    }

    /// Not listening (connection lost): changes may go unheard, so nothing is
    /// kept or used until [`CallerCache::listening`].
    pub fn deaf(&self) {
        self.kept.deaf();
    }

    pub fn figures(&self) -> Figures {
        self.kept.figures()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::{KeyHolder, Principal, Selection};
    use crate::ids::ApiKeyId;
    use crate::listen_cache::SHARDS;

    fn caller() -> Arc<Caller> {
        let key = KeyHolder { id: ApiKeyId::new(), key_prefix: "svck_abcdefgh".into(), scopes: vec![] };
        Arc::new(Caller { principal: Principal::ApiKey(key), selection: Selection::Unknown })
    }

    fn live(capacity: usize) -> CallerCache {
        let cache = CallerCache::new(capacity, CallerCache::MAX_AGE);
        cache.listening();
        cache
    }

    #[test]
    fn a_caller_answers_its_own_credential_and_header_only() {
        let cache = live(100);
        let fingerprint = Fingerprint::of("svck_secret", Some("ws"));
        let kept = caller();
        cache.keep(cache.ticket(fingerprint).unwrap(), kept.clone());
        assert_eq!(cache.get(&fingerprint), Some(kept));
        assert_eq!(cache.get(&Fingerprint::of("svck_secret", None)), None, "another header");
        assert_eq!(cache.get(&Fingerprint::of("svck_secret", Some("other"))), None, "another Workspace");
        assert_eq!(cache.get(&Fingerprint::of("svck_other", Some("ws"))), None, "another credential");
        assert_ne!(Fingerprint::of("ab", Some("c")), Fingerprint::of("a", Some("bc")));
        assert_ne!(Fingerprint::of("a", None), Fingerprint::of("a", Some("")));
    }

    #[test]
    fn a_change_drops_every_caller_and_a_read_that_raced_it_is_not_kept() {
        let cache = live(100);
        let (one, two) = (Fingerprint::of("one", None), Fingerprint::of("two", None));
        cache.keep(cache.ticket(one).unwrap(), caller());
        let ticket = cache.ticket(two).unwrap();
        cache.changed();
        assert_eq!(cache.get(&one), None);
        cache.keep(ticket, caller());
        assert_eq!(cache.get(&two), None, "read before the change");
    }

    #[test]
    fn nothing_is_kept_or_used_while_not_listening() {
        let cache = CallerCache::new(100, CallerCache::MAX_AGE);
        let fingerprint = Fingerprint::of("one", None);
        assert!(cache.ticket(fingerprint).is_none(), "not listening yet");
        cache.listening();
        cache.keep(cache.ticket(fingerprint).unwrap(), caller());
        cache.deaf();
        assert_eq!(cache.get(&fingerprint), None, "changes may go unheard");
        cache.listening();
        assert_eq!(cache.get(&fingerprint), None, "what was kept before is gone");
        let ticket = cache.ticket(fingerprint).unwrap();
        cache.deaf();
        cache.listening();
        cache.keep(ticket, caller());
        assert_eq!(cache.get(&fingerprint), None, "a read begun before the loss");
    }

    #[test]
    fn an_old_caller_is_not_used() {
        let cache = CallerCache::new(100, Duration::ZERO);
        cache.listening();
        let fingerprint = Fingerprint::of("one", None);
        cache.keep(cache.ticket(fingerprint).unwrap(), caller());
        assert_eq!(cache.get(&fingerprint), None);
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity() {
        let cache = live(SHARDS * 2);
        for i in 0..SHARDS * 20 {
            let fingerprint = Fingerprint::of(&i.to_string(), None);
            cache.keep(cache.ticket(fingerprint).unwrap(), caller());
        }
        let figures = cache.figures();
        assert!(figures.entries <= SHARDS * 2 && figures.entries > 0, "{figures:?}");
        let none = CallerCache::new(0, CallerCache::MAX_AGE);
        none.listening();
        assert!(none.ticket(Fingerprint::of("one", None)).is_none(), "a capacity of 0 keeps nothing");
    }
}
