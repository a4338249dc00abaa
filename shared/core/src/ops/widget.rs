//! widget.inspect, .configure, .manifest (widget.verify belongs with the
//! answer engine).

use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::chat::{ManifestRef, WidgetPackage};
use svc_contract::operations::widget::{AgentInput, ConfigurationOutput, ConfigureInput, ManifestOutput};

use super::public_chat::agent_id;
use super::{Ctx, Done, Handler};
use crate::chat::{self, CheckedPatch};
use crate::error::Result;
use crate::store;

fn not_found() -> Problem {
    Problem::not_found("Agent")
}

pub(crate) struct Inspect;

impl Handler for Inspect {
    type Input = AgentInput;
    type Output = ConfigurationOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: AgentInput) -> Result<Done<ConfigurationOutput>> {
        let agent = agent_id(&input.agent_id)?;
        let state = chat::agent_chat(conn, ctx.workspace()?.id, agent).await?.ok_or_else(not_found)?;
        Ok(ConfigurationOutput { agent_id: agent.to_string(), configuration: state.configuration }.into())
    }
}

pub(crate) struct Configure;

impl Handler for Configure {
    type Input = ConfigureInput;
    type Output = ConfigurationOutput;

    async fn handle(
        ctx: &Ctx<'_>,
        conn: &mut PgConnection,
        input: ConfigureInput,
    ) -> Result<Done<ConfigurationOutput>> {
        let patch = CheckedPatch::new(input.configuration)?;
        let agent = agent_id(&input.agent_id)?;
        // The Agent row, held exclusively, orders concurrent configures: each
        // merges into what the one before it wrote (read after the lock, in a
        // statement of its own, so it sees that write).
        let row = store::agents::lock(conn, ctx.workspace()?.id, agent).await?.ok_or_else(not_found)?;
        let stored = store::chat::widget_configuration(conn, agent).await?;
        let current = chat::effective_configuration(stored, &row.name, row.default_language.into());
        let configuration = patch.apply(current)?;
        store::chat::save_widget_configuration(conn, agent, &configuration).await?;
        Ok(ConfigurationOutput { agent_id: agent.to_string(), configuration }.into())
    }
}

pub(crate) struct Manifest;

impl Handler for Manifest {
    type Input = AgentInput;
    type Output = ManifestOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: AgentInput) -> Result<Done<ManifestOutput>> {
        let ws = ctx.workspace()?;
        let agent = agent_id(&input.agent_id)?;
        let state = chat::agent_chat(conn, ws.id, agent).await?.ok_or_else(not_found)?;
        let public_chat = chat::public_chat(&ctx.service.config().public_base_url, agent, state.enabled, state.website);
        Ok(ManifestOutput {
            workspace: ManifestRef { id: ws.id.to_string(), slug: ws.slug.clone() },
            agent: ManifestRef { id: agent.to_string(), slug: state.agent_slug },
            package: WidgetPackage::CURRENT,
            configuration: state.configuration,
            public_chat,
        }
        .into())
    }
}
