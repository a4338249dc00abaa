//! Entitlements (kept on the Workspace row) and the usage they are measured against.

use serde_json::Value;
use sqlx::PgConnection;
use time::OffsetDateTime;

use crate::entitlements::{Entitlement, LimitKey};
use crate::ids::WorkspaceId;

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Entitlement> {
    let row = sqlx::query!(
        r#"SELECT plan, trial_end, period_end, cancel_at_period_end, limit_overrides FROM workspaces WHERE id = $1"#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Entitlement::from_row(&row.plan, row.trial_end, row.period_end, row.cancel_at_period_end, &row.limit_overrides))
}

/// A Workspace row locked by a mutation that consumes a limit.
pub struct Locked {
    pub archived: bool,
    pub entitlement: Entitlement,
}

/// Reads the Entitlement and locks its Workspace row until the transaction ends,
/// so concurrent mutations that consume a limit are counted one after another.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Locked> {
    let row = sqlx::query!(
        r#"SELECT status, plan, trial_end, period_end, cancel_at_period_end, limit_overrides
           FROM workspaces WHERE id = $1 FOR UPDATE"#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Locked {
        archived: row.status == "archived",
        entitlement: Entitlement::from_row(
            &row.plan,
            row.trial_end,
            row.period_end,
            row.cancel_at_period_end,
            &row.limit_overrides,
        ),
    })
}

#[tracing::instrument(level = "debug", skip(conn))]
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
        UPDATE workspaces
        SET plan = $2, trial_end = $3, period_end = $4, cancel_at_period_end = false, limit_overrides = $5
        WHERE id = $1
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

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn usage(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Usage> {
    let row = sqlx::query!(
        r#"
        SELECT (SELECT count(*) FROM agents WHERE workspace_id = $1 AND deleted_at IS NULL) AS "agents!",
               (SELECT count(*) FROM api_keys WHERE workspace_id = $1 AND revoked_at IS NULL) AS "api_keys!"
        "#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Usage { agents: row.agents as u64, api_keys: row.api_keys as u64, ..Usage::default() })
}
