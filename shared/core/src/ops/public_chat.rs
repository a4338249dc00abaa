//! public_chat.inspect, .enable, .disable, .url

use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::operations::public_chat::{AgentInput, DisableInput, EnableInput, PublicChatOutput, UrlOutput};

use super::{Ctx, Done, Handler};
use crate::chat;
use crate::error::Result;
use crate::ids::AgentId;
use crate::store;

fn not_found() -> Problem {
    Problem::not_found("Agent")
}

/// An id that cannot be an Agent's names no Agent.
pub(super) fn agent_id(text: &str) -> Result<AgentId> {
    AgentId::parse(text).ok_or_else(|| not_found().into())
}

pub(crate) struct Inspect;

impl Handler for Inspect {
    type Input = AgentInput;
    type Output = PublicChatOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: AgentInput) -> Result<Done<PublicChatOutput>> {
        let agent = agent_id(&input.agent_id)?;
        let state = chat::agent_chat(conn, ctx.workspace()?.id, agent).await?.ok_or_else(not_found)?;
        let public_chat = chat::public_chat(&ctx.shared.config.public_base_url, agent, state.enabled, state.website);
        Ok(PublicChatOutput { public_chat }.into())
    }
}

pub(crate) struct Enable;

impl Handler for Enable {
    type Input = EnableInput;
    type Output = PublicChatOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: EnableInput) -> Result<Done<PublicChatOutput>> {
        chat::check_website(&input.website, "/website")?;
        let agent = agent_id(&input.agent_id)?;
        // Held until the transaction ends, so a concurrent delete waits and then
        // removes what this wrote.
        if !store::agents::hold(conn, ctx.workspace()?.id, agent).await? {
            return Err(not_found().into());
        }
        let row = store::chat::set_public_chat(conn, agent, true, &input.website).await?;
        let public_chat = chat::public_chat(&ctx.shared.config.public_base_url, agent, row.enabled, row.website);
        Ok(PublicChatOutput { public_chat }.into())
    }
}

pub(crate) struct Disable;

impl Handler for Disable {
    type Input = DisableInput;
    type Output = PublicChatOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: DisableInput) -> Result<Done<PublicChatOutput>> {
        // Confirmation first: refused the same way whatever the call names.
        if input.confirm.as_deref() != Some(input.agent_id.as_str()) {
            return Err(Problem::confirmation_required(
                "Disabling Public Chat needs `confirm` equal to the Agent's id.",
            )
            .with_detail("agentId", input.agent_id.as_str())
            .into());
        }
        let agent = agent_id(&input.agent_id)?;
        if !store::agents::hold(conn, ctx.workspace()?.id, agent).await? {
            return Err(not_found().into());
        }
        // The website stays, for the next enable.
        let row = store::chat::set_public_chat(conn, agent, false, &svc_contract::patch::Patch::Keep).await?;
        let public_chat = chat::public_chat(&ctx.shared.config.public_base_url, agent, row.enabled, row.website);
        Ok(PublicChatOutput { public_chat }.into())
    }
}

pub(crate) struct Url;

impl Handler for Url {
    type Input = AgentInput;
    type Output = UrlOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: AgentInput) -> Result<Done<UrlOutput>> {
        let agent = agent_id(&input.agent_id)?;
        if store::agents::get(conn, ctx.workspace()?.id, agent).await?.is_none() {
            return Err(not_found().into());
        }
        let url = chat::public_chat_url(&ctx.shared.config.public_base_url, agent);
        Ok(UrlOutput { agent_id: agent.to_string(), url }.into())
    }
}
