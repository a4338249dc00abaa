//! What `knowledge_source.wait` last read of sources still being processed,
//! kept per API process so that polling them does not read PostgreSQL again
//! until the source changes.
//!
//! - Only answers that are not terminal are kept (a pending or processing
//!   candidate): a terminal answer, success or failure, always comes from
//!   PostgreSQL, so a kept answer can at worst say "not yet" a little late, and
//!   the caller asks again as `retryAfterMs` says.
//! - PostgreSQL tells every API process when such a source changes (a trigger
//!   notifies `knowledge_source_changed` with its id, migration 0011); the
//!   entry is dropped then. Until this process listens, nothing is kept, and a
//!   lost listener drops everything.
//! - An entry is used for a short time at most, counted from the start of its
//!   read (`SVC_WAIT_CACHE_MAX_AGE_MS`, one second by default), which bounds
//!   how late an answer can be should notifications stop without the
//!   connection failing (a silent partition).
//! - A write through this process forgets what it changed once it commits
//!   ([`WaitCache::forget`]), before it answers.
//! - The price: after another process's change (a worker's), a kept answer may
//!   lag it by the time its notification takes to arrive (well under a
//!   millisecond on one host). It still says "not terminal", so a caller
//!   polling as told sees the change on a later call.
//! - A read that raced a notification is not kept: each shard counts the
//!   notifications it has seen, and an entry is stored only if none arrived
//!   between the start of its read and its storing.
//!
//! The keeping itself is [`ListenCache`]'s, which the caller cache shares.

use std::time::Duration;

use svc_contract::knowledge::KnowledgeSource;

use crate::ids::{AgentId, SourceId, WorkspaceId};
use crate::listen_cache::{self, Figures, ListenCache};

/// The channel migration 0011's trigger notifies, with the source id as payload.
pub const CHANNEL: &str = "knowledge_source_changed";

impl listen_cache::Key for SourceId {
    fn spread(&self) -> usize {
        // Ids end in random bits (UUIDv7).
        self.0.as_u128() as usize
    }
}

pub struct WaitCache {
    kept: ListenCache<SourceId, Entry>,
}

struct Entry {
    workspace: WorkspaceId,
    agent: AgentId,
    source: KnowledgeSource,
}

/// Taken before a read whose result may be kept.
pub type Ticket = listen_cache::Ticket<SourceId>;

/// What a write through this process made stale, forgotten once it commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stale {
    #[default]
    Nothing,
    Source(SourceId),
    /// Every source of the Agent.
    Agent(AgentId),
}

impl WaitCache {
    /// The longest an entry is used without news from PostgreSQL, by default.
    pub const MAX_AGE: Duration = Duration::from_secs(1);

    /// A cache of at most about `capacity` sources (0 keeps nothing), each
    /// used for at most `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self { kept: ListenCache::new(capacity, max_age) }
    }

    /// Whether it keeps nothing, ever (a capacity of 0).
    pub fn is_off(&self) -> bool {
        self.kept.is_off()
    }

    /// The kept answer for `id`, if it is the caller's (same Workspace and
    /// Agent) and fresh. Another tenant's source is never answered from here.
    pub fn get(&self, workspace: WorkspaceId, agent: AgentId, id: SourceId) -> Option<KnowledgeSource> {
        self.kept.get(&id, |e| (e.workspace == workspace && e.agent == agent).then(|| e.source.clone()))
    }

    /// Call before reading `id` from PostgreSQL; `None` when nothing may be kept.
    pub fn ticket(&self, id: SourceId) -> Option<Ticket> {
        self.kept.ticket(id)
    }

    /// Keeps an answer that is not terminal, read after `ticket` was taken,
    /// unless a notification reached its shard since (the read may predate
    /// the change it announced) or the shard is full of fresh entries.
    pub fn keep(&self, ticket: Ticket, workspace: WorkspaceId, agent: AgentId, id: SourceId, source: &KnowledgeSource) {
        if *ticket.key() != id {
            return;
        }
        self.kept.keep(ticket, Entry { workspace, agent, source: source.clone() });
    }

    /// A notification: `payload` (a source id) changed.
    pub fn changed(&self, payload: &str) {
        match uuid::Uuid::parse_str(payload) {
            Ok(uuid) => self.kept.remove(&SourceId(uuid)),
            // Not ours to read: forget everything rather than miss a change.
            Err(_) => self.kept.clear(),
        }
    }

    /// A write through this process committed: what it changed is forgotten at
    /// once (other processes hear of it from PostgreSQL), so a caller never
    /// gets an answer from before its own write.
    pub fn forget(&self, stale: Stale) {
        match stale {
            Stale::Nothing => {}
            Stale::Source(id) => self.kept.remove(&id),
            Stale::Agent(agent) => self.kept.retain(|e| e.agent != agent),
        }
    }

    /// Listening: from now on every change is heard, so answers may be kept.
    pub fn listening(&self) {
        self.kept.listening();
    }

    /// Not listening (connection lost): changes may go unheard, so nothing is
    /// kept or used until [`WaitCache::listening`].
    pub fn deaf(&self) {
        self.kept.deaf();
    }

    pub fn figures(&self) -> Figures {
        self.kept.figures()
    }
}

#[cfg(test)]
mod tests {
    use svc_contract::knowledge::{Provenance, ProvenanceKind, SourceState};

    use super::*;
    use crate::listen_cache::SHARDS;

    fn shown(id: SourceId) -> KnowledgeSource {
        KnowledgeSource {
            id: id.to_string(),
            workspace_id: "ws".into(),
            agent_id: "ag".into(),
            key: "faq".into(),
            title: "FAQ".into(),
            provenance: Provenance { kind: ProvenanceKind::Manual, uri: "u".into() },
            revision: "1".into(),
            digest: "d".into(),
            required: false,
            imported_at: crate::timestamp::millis(time::OffsetDateTime::UNIX_EPOCH),
            state: SourceState::Pending,
            active_revision: None,
            pending_revision: None,
        }
    }

    fn live(capacity: usize) -> WaitCache {
        let cache = WaitCache::new(capacity, WaitCache::MAX_AGE);
        cache.listening();
        cache
    }

    #[test]
    fn a_kept_answer_serves_its_own_workspace_and_agent_only() {
        let cache = live(100);
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        let ticket = cache.ticket(id).expect("listening");
        cache.keep(ticket, ws, agent, id, &shown(id));
        assert_eq!(cache.get(ws, agent, id), Some(shown(id)));
        assert_eq!(cache.get(WorkspaceId::new(), agent, id), None, "another Workspace");
        assert_eq!(cache.get(ws, AgentId::new(), id), None, "another Agent");
        assert_eq!(cache.get(ws, agent, SourceId::new()), None);
    }

    #[test]
    fn a_change_drops_the_answer() {
        let cache = live(100);
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        cache.keep(cache.ticket(id).unwrap(), ws, agent, id, &shown(id));
        cache.changed(&id.0.to_string());
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn a_read_that_raced_a_change_is_not_kept() {
        let cache = live(100);
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        let ticket = cache.ticket(id).unwrap();
        // The change is heard after the read began: the read may predate it.
        cache.changed(&id.0.to_string());
        cache.keep(ticket, ws, agent, id, &shown(id));
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn nothing_is_kept_or_used_while_not_listening() {
        let cache = WaitCache::new(100, WaitCache::MAX_AGE);
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        assert!(cache.ticket(id).is_none(), "not listening yet");
        cache.listening();
        let ticket = cache.ticket(id).unwrap();
        cache.keep(ticket, ws, agent, id, &shown(id));
        cache.deaf();
        assert_eq!(cache.get(ws, agent, id), None, "changes may go unheard");
        cache.listening();
        assert_eq!(cache.get(ws, agent, id), None, "what was kept before is gone");
        // A read begun before the connection was lost is not kept after it.
        let ticket = cache.ticket(id).unwrap();
        cache.deaf();
        cache.listening();
        cache.keep(ticket, ws, agent, id, &shown(id));
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn an_old_answer_is_not_used() {
        let cache = WaitCache::new(100, Duration::ZERO);
        cache.listening();
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        cache.keep(cache.ticket(id).unwrap(), ws, agent, id, &shown(id));
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn an_answer_is_as_old_as_its_read() {
        let cache = WaitCache::new(100, Duration::from_millis(50));
        cache.listening();
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        let ticket = cache.ticket(id).unwrap();
        // A slow read: by the time it is kept, it is already too old to use.
        std::thread::sleep(Duration::from_millis(60));
        cache.keep(ticket, ws, agent, id, &shown(id));
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn a_write_here_forgets_what_it_changed() {
        let cache = live(100);
        let (ws, agent, other) = (WorkspaceId::new(), AgentId::new(), AgentId::new());
        let ids: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
        for (i, &id) in ids.iter().enumerate() {
            let owner = if i < 3 { agent } else { other };
            cache.keep(cache.ticket(id).unwrap(), ws, owner, id, &shown(id));
        }
        cache.forget(Stale::Source(ids[0]));
        assert_eq!(cache.get(ws, agent, ids[0]), None);
        assert!(cache.get(ws, agent, ids[1]).is_some());
        // A read that began before an Agent-wide forget is not kept after it.
        let ticket = cache.ticket(ids[0]).unwrap();
        cache.forget(Stale::Agent(agent));
        cache.keep(ticket, ws, agent, ids[0], &shown(ids[0]));
        assert_eq!((cache.get(ws, agent, ids[0]), cache.get(ws, agent, ids[1])), (None, None));
        assert!(cache.get(ws, other, ids[3]).is_some(), "another Agent's stay");
        cache.forget(Stale::Nothing);
        assert!(cache.get(ws, other, ids[3]).is_some());
    }

    #[test]
    fn an_unreadable_notification_drops_everything() {
        let cache = live(100);
        let (ws, agent, id) = (WorkspaceId::new(), AgentId::new(), SourceId::new());
        cache.keep(cache.ticket(id).unwrap(), ws, agent, id, &shown(id));
        cache.changed("not an id");
        assert_eq!(cache.get(ws, agent, id), None);
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity() {
        let cache = live(SHARDS * 2);
        let (ws, agent) = (WorkspaceId::new(), AgentId::new());
        let ids: Vec<SourceId> = (0..SHARDS * 10).map(|_| SourceId::new()).collect();
        for &id in &ids {
            cache.keep(cache.ticket(id).unwrap(), ws, agent, id, &shown(id));
        }
        let figures = cache.figures();
        assert!(figures.entries <= SHARDS * 2, "{figures:?}");
        assert!(figures.entries > 0);
        let none = WaitCache::new(0, WaitCache::MAX_AGE);
        none.listening();
        assert!(none.ticket(ids[0]).is_none(), "a capacity of 0 keeps nothing");
    }
}
