//! knowledge_source.reconcile

use serde_json::Value;
use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::knowledge::ReconcileRun;
use svc_contract::operations::knowledge_source::ReconcileInput;

use super::{Ctx, Done, Handler};
use crate::error::{Error, Result};
use crate::ids::{AgentId, RunId};
use crate::knowledge::Scope;
use crate::reconcile;

pub(crate) struct Reconcile;

impl Handler for Reconcile {
    type Input = ReconcileInput;
    type Output = ReconcileRun;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ReconcileInput) -> Result<Done<ReconcileRun>> {
        let agent = AgentId::parse(&input.agent_id).ok_or_else(|| Problem::not_found("Agent"))?;
        let ws = ctx.workspace()?;
        let scope = Scope { workspace: ws.id, agent, entitlement: ctx.held.as_ref().unwrap_or(&ws.entitlement) };
        let submitted = reconcile::submit(conn, scope, &input).await?;
        // Its changes are a worker's: PostgreSQL tells the wait cache of them.
        Ok(Done { jobs: submitted.job.into_iter().collect(), ..submitted.run.into() })
    }

    /// A replay of an applied run answers the run as it stands now (contract
    /// §7), so a caller polls a run by repeating its request.
    async fn replay(ctx: &Ctx<'_>, conn: &mut PgConnection, stored: Value) -> Result<Value> {
        let Some(run) = stored.get("runId").and_then(Value::as_str).and_then(RunId::parse) else {
            return Ok(stored);
        };
        let live = reconcile::view(conn, ctx.workspace()?.id, run).await?;
        serde_json::to_value(live).map_err(|e| Error::internal(e.to_string()))
    }
}
