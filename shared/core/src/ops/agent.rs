//! agent.list, .inspect, .create, .configure, .delete

use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::operations::agent::{
    AgentOutput, ConfigureInput, CreateInput, DeleteInput, DeleteOutput, InspectInput, ListInput, ListOutput,
};
use svc_contract::resources::{self, AgentConfiguration, AgentStatus};
use svc_contract::schema::True;

use super::{Ctx, Done, Handler, Lock, Page};
use crate::entitlements::LimitKey;
use crate::error::Result;
use crate::ids::AgentId;
use crate::store::agents::{AgentRow, NewAgent};
use crate::store::usage::Delta;
use crate::{cursor, slug, store};

/// Temperature of a new Agent when none is given (contract §8).
pub const DEFAULT_TEMPERATURE: f64 = 0.2;

impl From<AgentRow> for resources::Agent {
    fn from(row: AgentRow) -> Self {
        resources::Agent {
            id: row.id.to_string(),
            workspace_id: row.workspace_id.to_string(),
            name: row.name,
            slug: row.slug,
            status: AgentStatus::Active,
            default_language: row.default_language.into(),
            configuration: AgentConfiguration { instructions: row.instructions, temperature: row.temperature },
        }
    }
}

fn not_found() -> Problem {
    Problem::not_found("Agent")
}

/// An id that cannot be an Agent's names no Agent.
fn agent_id(text: &str) -> Result<AgentId> {
    AgentId::parse(text).ok_or_else(|| not_found().into())
}

pub(crate) struct List;

impl Handler for List {
    type Input = ListInput;
    type Output = Page<ListOutput>;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ListInput) -> Result<Done<Self::Output>> {
        let after = input.cursor.as_deref().map(|c| cursor::decode("agents", c)).transpose()?;
        let rows = store::agents::list(conn, ctx.workspace()?.id, after, i64::from(input.page_size) + 1).await?;
        let (rows, next_cursor) = cursor::page(rows, input.page_size, "agents", |row| row.id.0);
        Ok(Page { data: ListOutput { agents: rows.into_iter().map(Into::into).collect() }, next_cursor }.into())
    }
}

pub(crate) struct Inspect;

impl Handler for Inspect {
    type Input = InspectInput;
    type Output = AgentOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: InspectInput) -> Result<Done<AgentOutput>> {
        let row =
            store::agents::get(conn, ctx.workspace()?.id, agent_id(&input.agent_id)?).await?.ok_or_else(not_found)?;
        Ok(AgentOutput { agent: row.into() }.into())
    }
}

pub(crate) struct Create;

impl Handler for Create {
    type Input = CreateInput;
    type Output = AgentOutput;

    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: CreateInput) -> Result<Done<AgentOutput>> {
        let ws = ctx.workspace()?;
        let wanted = Delta::of(LimitKey::Agents, 1);
        let mut agent = NewAgent {
            id: AgentId::new(),
            workspace_id: ws.id,
            name: &input.name,
            slug: "",
            default_language: input.default_language.into(),
            instructions: input.instructions.as_deref(),
            temperature: input.temperature.unwrap_or(DEFAULT_TEMPERATURE),
        };
        let row = match &input.slug {
            Some(slug) => {
                agent.slug = slug;
                match store::agents::insert(conn, &agent).await? {
                    Some(row) => row,
                    None => {
                        // Over the limit, the limit is the answer (the contract's order of checks).
                        store::usage::check_room(conn, ws.id, ctx.held.as_ref().unwrap_or(&ws.entitlement), &wanted)
                            .await?;
                        let message = format!("An Agent of this Workspace already has the slug `{slug}`.");
                        return Err(Problem::invalid("slug_taken", message).with_detail("slug", slug.as_str()).into());
                    }
                }
            }
            None => store::insert_with_free_slug(conn, &agent, &slug::derive(&input.name, "agent")).await?,
        };
        // Usage last (see `store::usage`).
        super::reserve(ctx, conn, &wanted).await?;
        Ok(AgentOutput { agent: row.into() }.into())
    }
}

pub(crate) struct Configure;

impl Handler for Configure {
    type Input = ConfigureInput;
    type Output = AgentOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ConfigureInput) -> Result<Done<AgentOutput>> {
        let ws = ctx.workspace()?;
        let id = agent_id(&input.agent_id)?;
        let mut row = store::agents::lock(conn, ws.id, id).await?.ok_or_else(not_found)?;
        if let Some(name) = input.name {
            row.name = name;
        }
        if let Some(language) = input.default_language {
            row.default_language = language.into();
        }
        row.instructions = input.instructions.apply(row.instructions);
        if let Some(temperature) = input.temperature {
            row.temperature = temperature;
        }
        let row = store::agents::update(conn, &row).await?.ok_or_else(not_found)?;
        Ok(AgentOutput { agent: row.into() }.into())
    }
}

pub(crate) struct Delete;

impl Handler for Delete {
    type Input = DeleteInput;
    type Output = DeleteOutput;

    /// Its sources go with it, and their usage.
    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: DeleteInput) -> Result<Done<DeleteOutput>> {
        if input.confirm != Some(true) {
            return Err(Problem::confirmation_required("Deleting an Agent needs `confirm: true`.").into());
        }
        let id = agent_id(&input.agent_id)?;
        let ws = ctx.workspace()?.id;
        if !store::agents::soft_delete(conn, ws, id).await? {
            return Err(not_found().into());
        }
        let freed = crate::knowledge::delete_all_of(conn, id).await?;
        // Its Public Chat and Widget go too: nothing of a deleted Agent stays
        // readable (reads join the live Agent as well).
        store::chat::forget(conn, id).await?;
        // Usage last (see `store::usage`).
        store::usage::adjust(conn, ws, &freed.and(Delta::of(LimitKey::Agents, -1))).await?;
        let output = DeleteOutput { agent_id: id.to_string(), deleted: True };
        Ok(Done::from(output).forgetting(crate::knowledge::waits::Stale::Agent(id)))
    }
}
