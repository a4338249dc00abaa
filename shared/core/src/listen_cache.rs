//! A cache kept per API process and in step with PostgreSQL by its
//! notifications ([`crate::listening`]): what the cache of
//! `knowledge_source.wait`'s answers ([`crate::knowledge::waits`]) and the
//! cache of authenticated callers ([`crate::auth::callers`]) share.
//!
//! - Until this process listens, nothing is kept or used, and a lost listener
//!   drops everything ([`ListenCache::listening`], [`ListenCache::deaf`]):
//!   a change that may go unheard never leaves a stale entry in use.
//! - An entry is used for `max_age` at most, counted from the start of its
//!   read: should notifications stop without the connection failing, an
//!   entry is at worst that much behind PostgreSQL.
//! - A read that raced a drop is not kept: each shard counts the drops it has
//!   seen, and an entry is stored only if none reached its shard between the
//!   start of its read ([`ListenCache::ticket`]) and its storing.
//! - At most about `capacity` entries are kept: when a shard is full, its
//!   expired entries go, and a new one is not kept if none has.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Shards of each cache, each behind a lock of its own.
pub(crate) const SHARDS: usize = 16;

/// What entries are found by. Its own bits are already spread (a hash, the
/// random bits of an id), so they pick its shard as they are.
pub trait Key: Copy + Eq + Hash {
    /// Any number whose low bits are spread evenly.
    fn spread(&self) -> usize;
}

pub struct ListenCache<K, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    per_shard: usize,
    max_age: Duration,
    live: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Shard<K, V> {
    /// Drops this shard has seen (a notification, a clear, a lost listener).
    epoch: u64,
    entries: HashMap<K, Entry<V>>,
}

struct Entry<V> {
    value: V,
    /// When the read that made it began: an entry is as old as its read.
    at: Instant,
}

/// Taken before a read whose result may be kept.
#[derive(Debug)]
pub struct Ticket<K> {
    key: K,
    epoch: u64,
    at: Instant,
}

impl<K> Ticket<K> {
    /// The key the read is of.
    pub fn key(&self) -> &K {
        &self.key
    }
}

/// Hits and misses since start, and what is kept now, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub live: bool,
}

impl<K: Key, V> ListenCache<K, V> {
    /// A cache of at most about `capacity` entries (0 keeps nothing), each
    /// used for at most `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard { epoch: 0, entries: HashMap::new() })).collect(),
            per_shard: capacity.div_ceil(SHARDS),
            max_age,
            live: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether it keeps nothing, ever (a capacity of 0).
    pub fn is_off(&self) -> bool {
        self.per_shard == 0
    }

    fn enabled(&self) -> bool {
        !self.is_off() && self.live.load(Ordering::Acquire)
    }

    fn shard(&self, key: &K) -> MutexGuard<'_, Shard<K, V>> {
        lock(&self.shards[key.spread() % SHARDS])
    }

    /// What `read` makes of the fresh entry for `key`, if there is one and
    /// `read` accepts it (`Some`): a hit; anything else is a miss.
    pub fn get<R>(&self, key: &K, read: impl FnOnce(&V) -> Option<R>) -> Option<R> {
        if !self.enabled() {
            return None;
        }
        let shard = self.shard(key);
        let found = shard.entries.get(key).filter(|e| e.at.elapsed() < self.max_age).and_then(|e| read(&e.value));
        drop(shard);
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Call before reading `key` from PostgreSQL; `None` when nothing may be kept.
    pub fn ticket(&self, key: K) -> Option<Ticket<K>> {
        if !self.enabled() {
            return None;
        }
        let epoch = self.shard(&key).epoch;
        Some(Ticket { key, epoch, at: Instant::now() })
    }

    /// Keeps `value`, read after `ticket` was taken, unless a drop reached
    /// its shard since (the read may predate the change it announced), the
    /// listener was lost, or the shard is full of fresh entries.
    pub fn keep(&self, ticket: Ticket<K>, value: V) {
        let mut shard = self.shard(&ticket.key);
        // Checked under the shard's lock: a drop that comes after this check
        // waits for the lock, and then drops what is stored here.
        if shard.epoch != ticket.epoch || !self.enabled() {
            return;
        }
        if shard.entries.len() >= self.per_shard && !shard.entries.contains_key(&ticket.key) {
            let max_age = self.max_age;
            shard.entries.retain(|_, e| e.at.elapsed() < max_age);
            if shard.entries.len() >= self.per_shard {
                return;
            }
        }
        shard.entries.insert(ticket.key, Entry { value, at: ticket.at });
    }

    /// Drops the entry for `key`; a read of its shard begun before is not
    /// kept after.
    pub fn remove(&self, key: &K) {
        let mut shard = self.shard(key);
        shard.epoch += 1;
        shard.entries.remove(key);
    }

    /// Keeps only the entries `keep` accepts; a read begun before is not kept
    /// after.
    pub fn retain(&self, keep: impl Fn(&V) -> bool) {
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            shard.epoch += 1;
            shard.entries.retain(|_, e| keep(&e.value));
        }
    }

    /// Drops everything; a read begun before is not kept after.
    pub fn clear(&self) {
        self.retain(|_| false);
    }

    /// Listening: from now on every change is heard, so entries may be kept.
    pub fn listening(&self) {
        self.clear();
        self.live.store(true, Ordering::Release);
    }

    /// Not listening (connection lost): changes may go unheard, so nothing is
    /// kept or used until [`ListenCache::listening`].
    pub fn deaf(&self) {
        self.live.store(false, Ordering::Release);
        self.clear();
    }

    pub fn figures(&self) -> Figures {
        Figures {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.shards.iter().map(|shard| lock(shard).entries.len()).sum(),
            live: self.live.load(Ordering::Relaxed),
        }
    }
}

/// A panic while holding a shard leaves plain data: use it.
fn lock<T>(shard: &Mutex<T>) -> MutexGuard<'_, T> {
    shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key whose shard is its number's (`Slot(n)` and `Slot(n + 16)` share one).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    struct Slot(usize);

    impl Key for Slot {
        fn spread(&self) -> usize {
            self.0
        }
    }

    type Cache = ListenCache<Slot, &'static str>;

    fn live(capacity: usize) -> Cache {
        let cache = Cache::new(capacity, Duration::from_secs(60));
        cache.listening();
        cache
    }

    fn kept(cache: &Cache, key: Slot) -> Option<&'static str> {
        cache.get(&key, |value| Some(*value))
    }

    fn keep(cache: &Cache, key: Slot, value: &'static str) {
        cache.keep(cache.ticket(key).expect("listening"), value);
    }

    #[test]
    fn a_kept_value_answers_its_key_as_its_reader_accepts_it() {
        let cache = live(100);
        keep(&cache, Slot(1), "one");
        assert_eq!(kept(&cache, Slot(1)), Some("one"));
        assert_eq!(kept(&cache, Slot(17)), None, "another key of the same shard");
        assert_eq!(cache.get(&Slot(1), |_| None::<()>), None, "refused by its reader");
        assert_eq!(kept(&cache, Slot(1)), Some("one"), "a refusal drops nothing");
        assert_eq!(cache.figures(), Figures { hits: 2, misses: 2, entries: 1, live: true });
    }

    #[test]
    fn a_removed_key_is_gone_and_a_read_of_its_shard_begun_before_is_not_kept() {
        let cache = live(100);
        keep(&cache, Slot(1), "one");
        keep(&cache, Slot(2), "two");
        let (same_shard, other_shard) = (cache.ticket(Slot(17)).unwrap(), cache.ticket(Slot(3)).unwrap());
        cache.remove(&Slot(1));
        assert_eq!(kept(&cache, Slot(1)), None);
        assert_eq!(kept(&cache, Slot(2)), Some("two"), "the other keys stay");
        cache.keep(same_shard, "seventeen");
        assert_eq!(kept(&cache, Slot(17)), None, "read while the change was on its way");
        cache.keep(other_shard, "three");
        assert_eq!(kept(&cache, Slot(3)), Some("three"), "a read of another shard is kept");
    }

    #[test]
    fn retain_and_clear_reach_every_shard_and_every_read_begun_before() {
        let cache = live(100);
        for (key, value) in [(1, "odd"), (2, "even"), (3, "odd"), (4, "even")] {
            keep(&cache, Slot(key), value);
        }
        let ticket = cache.ticket(Slot(5)).unwrap();
        cache.retain(|value| *value == "even");
        assert_eq!([1, 2, 3, 4].map(|key| kept(&cache, Slot(key))), [None, Some("even"), None, Some("even")]);
        cache.keep(ticket, "odd");
        assert_eq!(kept(&cache, Slot(5)), None);
        let ticket = cache.ticket(Slot(6)).unwrap();
        cache.clear();
        cache.keep(ticket, "even");
        assert_eq!(cache.figures().entries, 0);
    }

    #[test]
    fn nothing_is_kept_or_used_while_not_listening() {
        let cache = Cache::new(100, Duration::from_secs(60));
        assert!(cache.ticket(Slot(1)).is_none(), "not listening yet");
        cache.listening();
        keep(&cache, Slot(1), "one");
        cache.deaf();
        assert_eq!(kept(&cache, Slot(1)), None, "changes may go unheard");
        assert!(cache.ticket(Slot(1)).is_none());
        cache.listening();
        assert_eq!(kept(&cache, Slot(1)), None, "what was kept before is gone");
        let ticket = cache.ticket(Slot(1)).unwrap();
        cache.deaf();
        cache.listening();
        cache.keep(ticket, "one");
        assert_eq!(kept(&cache, Slot(1)), None, "a read begun before the loss");
        assert_eq!(cache.figures().misses, 2, "misses counted only while listening");
    }

    #[test]
    fn an_entry_is_as_old_as_its_read() {
        let cache = ListenCache::<Slot, &str>::new(100, Duration::ZERO);
        cache.listening();
        keep(&cache, Slot(1), "one");
        assert_eq!(kept(&cache, Slot(1)), None, "never fresh");
        let cache = ListenCache::<Slot, &str>::new(100, Duration::from_millis(50));
        cache.listening();
        let ticket = cache.ticket(Slot(1)).unwrap();
        // A slow read: by the time it is kept, it is already too old to use.
        std::thread::sleep(Duration::from_millis(60));
        cache.keep(ticket, "one");
        assert_eq!(kept(&cache, Slot(1)), None);
    }

    #[test]
    fn a_full_shard_makes_room_only_from_expired_entries() {
        // One entry per shard.
        let cache = live(SHARDS);
        keep(&cache, Slot(1), "first");
        keep(&cache, Slot(17), "second");
        assert_eq!((kept(&cache, Slot(1)), kept(&cache, Slot(17))), (Some("first"), None), "full of fresh entries");
        keep(&cache, Slot(1), "again");
        assert_eq!(kept(&cache, Slot(1)), Some("again"), "a kept key is kept anew");
        let expiring = ListenCache::<Slot, &str>::new(SHARDS, Duration::ZERO);
        expiring.listening();
        keep(&expiring, Slot(1), "first");
        keep(&expiring, Slot(17), "second");
        assert_eq!(expiring.figures().entries, 1, "the expired one made room");
        for key in 0..SHARDS * 10 {
            keep(&cache, Slot(key), "many");
        }
        assert_eq!(cache.figures().entries, SHARDS, "at most its capacity");
        let off = Cache::new(0, Duration::from_secs(60));
        off.listening();
        assert!(off.is_off() && off.ticket(Slot(1)).is_none(), "a capacity of 0 keeps nothing");
    }
}
