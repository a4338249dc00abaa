//! Entitlements, kept on the Workspace row.

use serde_json::Value;
use sqlx::PgConnection;
use time::OffsetDateTime;

use crate::entitlements::Entitlement;
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
