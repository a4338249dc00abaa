//! What a Workspace uses of its limits: one `workspace_usage` row, changed by the
//! writes that change usage, in their own transactions.
//!
//! Every writer of a Workspace ends on this row, so a writer takes it last and
//! briefly: its one usage statement ([`reserve`] or [`adjust`]) comes after its
//! other writes, just before the commit. The statement itself is the lock (an
//! UPDATE holds the row until the transaction ends) and, for [`reserve`], the
//! limit check: two writers never read the same usage and both pass. Nothing
//! waits on another row while holding this one, so writers of one Workspace
//! wait for each other only for the end of a transaction, never for its work
//! (an add's inserts, a promotion's index write), and usage changes in the
//! same transaction as what it counts: right after a crash too.

use sqlx::PgConnection;

use crate::entitlements::LimitKey;
use crate::ids::WorkspaceId;

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
}

/// The usage row of a new Workspace.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn create(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<()> {
    sqlx::query!("INSERT INTO workspace_usage (workspace_id) VALUES ($1)", workspace as WorkspaceId)
        .execute(conn)
        .await?;
    Ok(())
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Usage> {
    sqlx::query_as!(
        Usage,
        r#"
        SELECT agents, api_keys, knowledge_sources, knowledge_bytes,
               CASE WHEN conversations_month = date_trunc('month', now() AT TIME ZONE 'UTC')::date
                    THEN conversations ELSE 0 END AS "conversations!"
        FROM workspace_usage WHERE workspace_id = $1
        "#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await
}

/// Applies `delta` if every counter it grows stays within its limit (`limits`,
/// in the order of [`LimitKey::ALL`]); `None`, with nothing written, otherwise.
/// A counter the delta does not grow is not checked, so a Workspace over a
/// lowered limit can still shrink.
///
/// The row stays locked until the transaction ends: call it last (see the
/// module documentation).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn reserve(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    delta: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<Option<Usage>> {
    sqlx::query_as!(
        Usage,
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
          AND (d.sources <= 0 OR u.knowledge_sources + d.sources <= $9)
          AND (d.bytes <= 0 OR u.knowledge_bytes + d.bytes <= $10)
          AND (d.conversations <= 0
               OR CASE WHEN u.conversations_month = month.start THEN u.conversations ELSE 0 END
                  + d.conversations <= $11)
        RETURNING u.agents, u.api_keys, u.knowledge_sources, u.knowledge_bytes, u.conversations
        "#,
        workspace as WorkspaceId,
        delta.agents,
        delta.api_keys,
        delta.knowledge_sources,
        delta.knowledge_bytes,
        delta.conversations,
        limits[0],
        limits[1],
        limits[2],
        limits[3],
        limits[4],
    )
    .fetch_optional(conn)
    .await
}

/// Applies `delta` without checking limits: for changes that free what they
/// count (a deletion, a revision replaced), or that were reserved already. The
/// row stays locked until the transaction ends: call it last.
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
