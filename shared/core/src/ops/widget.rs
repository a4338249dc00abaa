//! widget.inspect, .configure, .manifest, .verify

use sqlx::PgConnection;
use svc_contract::chat::{ManifestRef, WidgetPackage};
use svc_contract::operations::widget::{
    AgentInput, ConfigurationOutput, ConfigureInput, ManifestOutput, VerifyChecks, VerifyInput, VerifyOutput,
};
use svc_contract::{Problem, ProblemCode};

use super::public_chat::agent_id;
use super::{Ctx, Done, Handler};
use crate::chat::{self, CheckedPatch, Origin, PublicAgent};
use crate::error::{Error, Result};
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
        let public_chat = chat::public_chat(&ctx.shared.config.public_base_url, agent, state.enabled, state.website);
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

/// widget.verify: the six checks of contract §12, then one real answer. It
/// manages its own connections (see [`super::detached`]): none is held while
/// the answer engine asks a model.
pub(crate) async fn verify(ctx: &Ctx<'_>, input: VerifyInput) -> Result<VerifyOutput> {
    let agent_id = agent_id(&input.agent_id)?;
    let (agent, knowledge_ready) = {
        let mut conn = crate::runtime::connection(&ctx.shared.pool).await?;
        let workspace = ctx.workspace()?.id;
        let agent = chat::public_agent(&mut conn, agent_id)
            .await?
            .filter(|agent| agent.workspace_id() == workspace)
            .ok_or_else(not_found)?;
        let (active, required_missing) = store::knowledge::readiness(&mut conn, agent_id).await?;
        (agent, active > 0 && required_missing == 0)
    };
    let origin = Origin::parse(&input.origin);
    let mut checks = VerifyChecks {
        agent: true,
        configuration: configuration_is_valid(&agent),
        origin: origin.as_ref().is_ok_and(|origin| agent.allows_origin(origin)),
        knowledge: knowledge_ready,
        public_chat: agent.public_chat_enabled,
        answer: false,
    };
    if !(checks.configuration && checks.origin && checks.knowledge && checks.public_chat) {
        // No answer is asked for, so no conversation is spent.
        return Err(failed(&checks, "The Widget is not ready to answer on this origin.").into());
    }
    let asked = chat::ask(ctx.shared.engine(), &agent, &input.question, None).await;
    let answer = match asked {
        Ok(asked) => asked.answer.text,
        Err(Error::Problem(problem)) if problem.code == ProblemCode::ProcessingFailed => {
            let mut refused = failed(&checks, "The answer engine did not answer.");
            if let Some(reason) = problem.details.as_ref().and_then(|d| d.get("reason")) {
                refused = refused.with_detail("reason", reason.clone());
            }
            return Err(refused.into());
        }
        Err(error) => return Err(error),
    };
    checks.answer = !answer.trim().is_empty();
    if !checks.answer {
        return Err(failed(&checks, "The answer engine gave an empty answer.").into());
    }
    Ok(VerifyOutput {
        agent_id: agent_id.to_string(),
        origin: origin.map(Origin::into_string).unwrap_or(input.origin),
        configuration: agent.widget,
        checks,
        answer,
    })
}

/// The stored configuration is still valid under today's rules: every allowed
/// origin parses (the public side ignores one that does not) and the website,
/// if any, is an absolute http(s) URL.
fn configuration_is_valid(agent: &PublicAgent) -> bool {
    agent.allowed_origins.len() == agent.widget.allowed_origins.len()
        && agent.widget.website.as_deref().is_none_or(|website| chat::check_url(website).is_ok())
}

/// `processing_failed` naming the checks that failed, with all six in
/// `details.checks`.
fn failed(checks: &VerifyChecks, message: &str) -> Problem {
    let named = [
        ("agent", checks.agent),
        ("configuration", checks.configuration),
        ("origin", checks.origin),
        ("knowledge", checks.knowledge),
        ("publicChat", checks.public_chat),
        ("answer", checks.answer),
    ];
    let failing: Vec<&str> = named.iter().filter(|(_, ok)| !ok).map(|(name, _)| *name).collect();
    Problem::new(ProblemCode::ProcessingFailed, format!("{message} Failed checks: {}.", failing.join(", ")))
        .with_detail("checks", serde_json::to_value(checks).unwrap_or_default())
        .with_detail("failedChecks", failing)
}
