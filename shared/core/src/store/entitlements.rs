//! Entitlement rows and the usage they are measured against.

use serde_json::Value;
use sqlx::PgConnection;
use time::OffsetDateTime;

use crate::entitlements::{Entitlement, LimitKey};
use crate::ids::WorkspaceId;

#[tracing::instrument(skip(conn))]
pub async fn insert_trial(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    trial_end: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO entitlements (workspace_id, plan, trial_end) VALUES ($1, 'trial', $2)",
        workspace as WorkspaceId,
        trial_end,
    )
    .execute(conn)
    .await?;
    Ok(())
}

async fn fetch(conn: &mut PgConnection, workspace: WorkspaceId, for_update: bool) -> sqlx::Result<Entitlement> {
    // Two statements rather than string-built SQL, so both stay compile-checked.
    let row = if for_update {
        sqlx::query!(
            r#"SELECT plan, trial_end, period_end, cancel_at_period_end, limit_overrides
               FROM entitlements WHERE workspace_id = $1 FOR UPDATE"#,
            workspace as WorkspaceId,
        )
        .fetch_one(conn)
        .await
        .map(|r| (r.plan, r.trial_end, r.period_end, r.cancel_at_period_end, r.limit_overrides))?
    } else {
        sqlx::query!(
            r#"SELECT plan, trial_end, period_end, cancel_at_period_end, limit_overrides
               FROM entitlements WHERE workspace_id = $1"#,
            workspace as WorkspaceId,
        )
        .fetch_one(conn)
        .await
        .map(|r| (r.plan, r.trial_end, r.period_end, r.cancel_at_period_end, r.limit_overrides))?
    };
    Ok(Entitlement::from_row(&row.0, row.1, row.2, row.3, &row.4))
}

#[tracing::instrument(skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Entitlement> {
    fetch(conn, workspace, false).await
}

/// Reads the Entitlement and locks it until the transaction ends, so concurrent
/// mutations that consume a limit are counted one after another.
#[tracing::instrument(skip(conn))]
pub async fn lock(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Entitlement> {
    fetch(conn, workspace, true).await
}

#[tracing::instrument(skip(conn))]
pub async fn set_plan(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    plan: &str,
    trial_end: Option<OffsetDateTime>,
    period_end: Option<OffsetDateTime>,
    limit_overrides: &Value,
) -> sqlx::Result<bool> {
    let updated = sqlx::query!(
        r#"
        UPDATE entitlements
        SET plan = $2, trial_end = $3, period_end = $4, cancel_at_period_end = false,
            limit_overrides = $5, updated_at = now()
        WHERE workspace_id = $1
        "#,
        workspace as WorkspaceId,
        plan,
        trial_end,
        period_end,
        limit_overrides,
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Usage counted against the limits, by limit key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub agents: u64,
    pub api_keys: u64,
    pub knowledge_sources: u64,
    pub knowledge_bytes: u64,
    pub conversations: u64,
}

impl Usage {
    pub fn get(&self, key: LimitKey) -> u64 {
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
        LimitKey::ALL.iter().map(|k| (k.as_str().to_owned(), self.get(*k))).collect()
    }
}

#[tracing::instrument(skip(conn))]
pub async fn usage(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Usage> {
    let agents = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM agents WHERE workspace_id = $1 AND deleted_at IS NULL"#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Usage { agents: agents as u64, ..Usage::default() })
}
