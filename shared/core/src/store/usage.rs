//! What a Workspace uses of its limits: one `workspace_usage` row and, for
//! knowledge, its escrowed shards ([`shards`]), changed by the writes that
//! change usage, in their own transactions.
//!
//! A writer changes usage with its last statement ([`reserve`] or [`adjust`]),
//! after its other writes, just before the commit, so what it locks there is
//! held briefly. On the row, the statement itself is the lock (an UPDATE holds
//! the row until the transaction ends) and, for a reservation, the limit
//! check: two writers never read the same usage and both pass. Knowledge grows
//! on the shards instead, so a Workspace's adds do not queue on its row (a
//! bulk import is many adds at once); frees lower the row's knowledge base.
//! Nothing waits on another row while holding these, and usage changes in the
//! same transaction as what it counts: right after a crash too.

use sqlx::{Connection, PgConnection};

use crate::entitlements::LimitKey;
use crate::ids::WorkspaceId;

pub mod shards;

use shards::{Reservation, Wanted};

/// How long a reservation waits at most, in steps of [`UNDECIDED_PAUSE`], for
/// room escrowed to shards that other writers hold (each at its last
/// statement) before it answers that it could not decide.
const UNDECIDED_TRIES: u32 = 50;
const UNDECIDED_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// Usage counted against the limits, by limit key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub agents: i64,
    pub api_keys: i64,
    pub knowledge_sources: i64,
    pub knowledge_bytes: i64,
    /// Conversations of the current calendar month (UTC).
    pub conversations: i64,
}

impl Usage {
    pub fn get(&self, key: LimitKey) -> i64 {
        match key {
            LimitKey::Agents => self.agents,
            LimitKey::ApiKeys => self.api_keys,
            LimitKey::KnowledgeSources => self.knowledge_sources,
            LimitKey::KnowledgeBytes => self.knowledge_bytes,
            LimitKey::Conversations => self.conversations,
        }
    }

    /// `usage` as the Entitlement reports it.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, u64> {
        LimitKey::ALL.iter().map(|k| (k.as_str().to_owned(), self.get(*k).max(0) as u64)).collect()
    }
}

/// A change of usage: how much each counter grows (negative: shrinks).
pub type Delta = Usage;

impl Delta {
    /// A change of one counter.
    pub fn of(key: LimitKey, amount: i64) -> Self {
        let mut delta = Self::default();
        match key {
            LimitKey::Agents => delta.agents = amount,
            LimitKey::ApiKeys => delta.api_keys = amount,
            LimitKey::KnowledgeSources => delta.knowledge_sources = amount,
            LimitKey::KnowledgeBytes => delta.knowledge_bytes = amount,
            LimitKey::Conversations => delta.conversations = amount,
        }
        delta
    }

    /// This change and `other` together.
    pub fn and(self, other: Delta) -> Self {
        Self {
            agents: self.agents + other.agents,
            api_keys: self.api_keys + other.api_keys,
            knowledge_sources: self.knowledge_sources + other.knowledge_sources,
            knowledge_bytes: self.knowledge_bytes + other.knowledge_bytes,
            conversations: self.conversations + other.conversations,
        }
    }

    /// The knowledge this change grows (reserved on the shards), and the rest
    /// (applied to the row, frees of knowledge included).
    fn split(&self) -> (Delta, Delta) {
        let grown = Delta {
            knowledge_sources: self.knowledge_sources.max(0),
            knowledge_bytes: self.knowledge_bytes.max(0),
            ..Delta::default()
        };
        let rest = Delta {
            knowledge_sources: self.knowledge_sources.min(0),
            knowledge_bytes: self.knowledge_bytes.min(0),
            ..*self
        };
        (grown, rest)
    }
}

/// The usage row of a new Workspace.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn create(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<()> {
    sqlx::query!("INSERT INTO workspace_usage (workspace_id) VALUES ($1)", workspace as WorkspaceId)
        .execute(&mut *conn)
        .await?;
    shards::create(conn, workspace).await
}

/// The usage committed now (the row and its shards).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Usage> {
    sqlx::query_as!(
        Usage,
        r#"
        SELECT u.agents, u.api_keys,
               u.knowledge_sources + (SELECT coalesce(sum(s.sources), 0) FROM workspace_usage_shards s
                                      WHERE s.workspace_id = u.workspace_id)::bigint AS "knowledge_sources!",
               u.knowledge_bytes + (SELECT coalesce(sum(s.bytes), 0) FROM workspace_usage_shards s
                                    WHERE s.workspace_id = u.workspace_id)::bigint AS "knowledge_bytes!",
               CASE WHEN u.conversations_month = date_trunc('month', now() AT TIME ZONE 'UTC')::date
                    THEN u.conversations ELSE 0 END AS "conversations!"
        FROM workspace_usage u WHERE u.workspace_id = $1
        "#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await
}

/// Applies `delta` if every counter it grows stays within its limit (`limits`,
/// in the order of [`LimitKey::ALL`]); `false`, with nothing written, otherwise
/// (also when room is left only on shards other writers held throughout).
/// A counter the delta does not grow is not checked, so a Workspace over a
/// lowered limit can still shrink.
///
/// What it locks stays locked until the transaction ends: call it last (see
/// the module documentation).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn reserve(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    delta: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let (grown, rest) = delta.split();
    if grown == Delta::default() {
        return reserve_on_row(conn, workspace, &rest, limits).await;
    }
    if rest == Delta::default() {
        return reserve_on_shards(conn, workspace, &grown, limits).await;
    }
    // Both: the row first (the order every writer takes them in), and neither
    // written unless both are.
    let mut both = conn.begin().await?;
    let reserved = reserve_on_row(&mut both, workspace, &rest, limits).await?
        && reserve_on_shards(&mut both, workspace, &grown, limits).await?;
    if reserved {
        both.commit().await?
    } else {
        both.rollback().await?
    }
    Ok(reserved)
}

/// Grows knowledge on the shards: a few tries while the room left is escrowed
/// to shards other writers hold (they are at their last statement).
async fn reserve_on_shards(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    grown: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let wanted = Wanted {
        sources: grown.knowledge_sources,
        bytes: grown.knowledge_bytes,
        sources_limit: limits[2],
        bytes_limit: limits[3],
    };
    for _ in 1..UNDECIDED_TRIES {
        match shards::reserve(conn, workspace, wanted).await? {
            Reservation::Granted => return Ok(true),
            Reservation::Refused => return Ok(false),
            Reservation::Undecided => tokio::time::sleep(UNDECIDED_PAUSE).await,
        }
    }
    Ok(shards::reserve(conn, workspace, wanted).await? == Reservation::Granted)
}

/// Applies a delta that grows no knowledge to the row, checking what it grows.
async fn reserve_on_row(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    delta: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let applied = sqlx::query_scalar!(
        r#"
        WITH month AS (SELECT date_trunc('month', now() AT TIME ZONE 'UTC')::date AS start),
             d AS (SELECT $2::bigint AS agents, $3::bigint AS api_keys, $4::bigint AS sources,
                          $5::bigint AS bytes, $6::bigint AS conversations)
        UPDATE workspace_usage u SET
            agents = u.agents + d.agents,
            api_keys = u.api_keys + d.api_keys,
            knowledge_sources = u.knowledge_sources + d.sources,
            knowledge_bytes = u.knowledge_bytes + d.bytes,
            conversations = CASE WHEN u.conversations_month = month.start THEN u.conversations ELSE 0 END
                            + d.conversations,
            conversations_month = month.start
        FROM month, d
        WHERE u.workspace_id = $1
          AND (d.agents <= 0 OR u.agents + d.agents <= $7)
          AND (d.api_keys <= 0 OR u.api_keys + d.api_keys <= $8)
          AND (d.conversations <= 0
               OR CASE WHEN u.conversations_month = month.start THEN u.conversations ELSE 0 END
                  + d.conversations <= $9)
        RETURNING 1 AS "applied!"
        "#,
        workspace as WorkspaceId,
        delta.agents,
        delta.api_keys,
        delta.knowledge_sources.min(0),
        delta.knowledge_bytes.min(0),
        delta.conversations,
        limits[0],
        limits[1],
        limits[4],
    )
    .fetch_optional(conn)
    .await?;
    Ok(applied.is_some())
}

/// Applies `delta` to the row without checking limits: for changes that free
/// what they count (a deletion, a revision replaced). The row stays locked
/// until the transaction ends: call it last.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn adjust(conn: &mut PgConnection, workspace: WorkspaceId, delta: &Delta) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        UPDATE workspace_usage SET
            agents = agents + $2::bigint,
            api_keys = api_keys + $3::bigint,
            knowledge_sources = knowledge_sources + $4::bigint,
            knowledge_bytes = knowledge_bytes + $5::bigint
        WHERE workspace_id = $1
        "#,
        workspace as WorkspaceId,
        delta.agents,
        delta.api_keys,
        delta.knowledge_sources,
        delta.knowledge_bytes,
    )
    .execute(conn)
    .await?;
    Ok(())
}
