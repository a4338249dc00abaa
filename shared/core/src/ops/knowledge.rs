//! knowledge_source.list, .inspect, .add, .wait, .replace, .delete
//! (reconcile has its own module).

use serde::{Deserialize, Deserializer};
use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::operations::knowledge_source::{
    AddInput, DeleteInput, DeleteOutput, KnowledgeSourceOutput, ListInput, ListOutput, ReplaceInput, SourceInput,
    WaitOutput,
};
use svc_contract::schema::True;

use super::{Ctx, Done, Handler, Lock, Page, hold};
use crate::error::Result;
use crate::ids::{AgentId, SourceId};
use crate::knowledge::waits::Stale;
use crate::knowledge::{self, NewIds, Replaced, Scope};
use crate::store::knowledge::Standing;
use crate::{cursor, store};

fn agent_not_found() -> Problem {
    Problem::not_found("Agent")
}

fn source_not_found() -> Problem {
    Problem::not_found("Knowledge Source")
}

/// The Agent an input names; an id that cannot be one names nothing.
fn agent_id(text: &str) -> Result<AgentId> {
    AgentId::parse(text).ok_or_else(|| agent_not_found().into())
}

fn source_id(text: &str) -> Result<SourceId> {
    SourceId::parse(text).ok_or_else(|| source_not_found().into())
}

/// Where a write acts, with the Entitlement read under the Workspace's lock
/// (for an add, which takes that lock in its own statement: the Entitlement
/// the call path admitted it with).
fn scope<'a>(ctx: &'a Ctx<'_>, agent: AgentId) -> Result<Scope<'a>> {
    let ws = ctx.workspace()?;
    Ok(Scope { workspace: ws.id, agent, entitlement: ctx.held.as_ref().unwrap_or(&ws.entitlement) })
}

/// The source as this call's transaction sees it.
async fn read_back(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    agent: AgentId,
    id: SourceId,
) -> Result<KnowledgeSourceOutput> {
    let row = store::knowledge::get(conn, ctx.workspace()?.id, agent, id).await?.ok_or_else(source_not_found)?;
    Ok(KnowledgeSourceOutput { knowledge_source: row.into() })
}

pub(crate) struct List;

impl Handler for List {
    type Input = ListInput;
    type Output = Page<ListOutput>;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ListInput) -> Result<Done<Self::Output>> {
        let agent = agent_id(&input.agent_id)?;
        let after = input.cursor.as_deref().map(|c| cursor::decode("knowledge_sources", c)).transpose()?;
        if store::agents::get(conn, ctx.workspace()?.id, agent).await?.is_none() {
            return Err(agent_not_found().into());
        }
        let rows = store::knowledge::list(conn, agent, after, i64::from(input.page_size) + 1).await?;
        let (rows, next_cursor) = cursor::page(rows, input.page_size, "knowledge_sources", |row| row.id.0);
        let knowledge_sources = rows.into_iter().map(Into::into).collect();
        Ok(Page { data: ListOutput { knowledge_sources }, next_cursor }.into())
    }
}

pub(crate) struct Inspect;

impl Handler for Inspect {
    type Input = SourceInput;
    type Output = KnowledgeSourceOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: SourceInput) -> Result<Done<Self::Output>> {
        let (agent, source) = (agent_id(&input.agent_id)?, source_id(&input.source_id)?);
        Ok(read_back(ctx, conn, agent, source).await?.into())
    }
}

pub(crate) struct Add;

/// knowledge_source.add's input, with the ids the call gives the source and
/// its first revision, chosen as it is parsed: every attempt of the call
/// writes the same ([`knowledge::NewIds`]).
pub(crate) struct Adding {
    input: AddInput,
    ids: NewIds,
}

impl<'de> Deserialize<'de> for Adding {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Ok(Self { input: AddInput::deserialize(deserializer)?, ids: NewIds::fresh() })
    }
}

impl Handler for Add {
    type Input = Adding;
    type Output = KnowledgeSourceOutput;

    const LOCK: Lock = Lock::Sharded;
    const HOLDS_WORKSPACE: bool = true;

    /// Under the Workspace as the call path read it, when that admits the
    /// call and the input is valid ([`knowledge::add_alone`]).
    async fn handle_alone(
        ctx: &Ctx<'_>,
        conn: &mut PgConnection,
        adding: &Adding,
    ) -> Result<Option<Done<Self::Output>>> {
        let (input, ws) = (&adding.input, ctx.workspace()?);
        let submission = &input.submission;
        let (Some(agent), Ok(())) = (AgentId::parse(&input.agent_id), submission.verify()) else {
            return Ok(None);
        };
        let status = ws.status.into();
        if ctx.admit_as(status, &ws.entitlement).is_err() {
            return Ok(None);
        }
        let standing = Standing::of(status, &ws.entitlement);
        let scope = scope(ctx, agent)?;
        let added = knowledge::add_alone(conn, scope, &input.key, submission, adding.ids, &standing).await?;
        Ok(added.map(|(source, job)| Done {
            jobs: vec![job],
            ..KnowledgeSourceOutput { knowledge_source: source.into() }.into()
        }))
    }

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, adding: Adding) -> Result<Done<Self::Output>> {
        let (input, ids) = (&adding.input, adding.ids);
        let submission = &input.submission;
        // An input the add's statement cannot be sent with (an Agent id that
        // cannot be one, a wrong digest) is refused after the Workspace's own
        // checks, as every write's problems are.
        let agent = match agent_id(&input.agent_id).and_then(|agent| Ok(submission.verify().map(|()| agent)?)) {
            Ok(agent) => agent,
            Err(problem) => {
                hold(ctx, conn).await?;
                return Err(problem);
            }
        };
        let admit = |held: &_| ctx.admit(held);
        let (source, job) = knowledge::add(conn, scope(ctx, agent)?, &input.key, submission, ids, admit).await?;
        Ok(Done { jobs: vec![job], ..KnowledgeSourceOutput { knowledge_source: source.into() }.into() })
    }
}

pub(crate) struct Wait;

impl Handler for Wait {
    type Input = SourceInput;
    type Output = WaitOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: SourceInput) -> Result<Done<Self::Output>> {
        let (agent, source) = (agent_id(&input.agent_id)?, source_id(&input.source_id)?);
        let waits = &ctx.shared.waits;
        let waited =
            knowledge::wait(conn, waits, ctx.workspace()?.id, agent, source).await?.ok_or_else(source_not_found)?;
        let retry_after_ms =
            if waited.terminal { None } else { Some(knowledge::retry_after_ms(ctx.shared.backlog(conn).await?)) };
        Ok(WaitOutput { knowledge_source: waited.source, terminal: waited.terminal, retry_after_ms }.into())
    }
}

pub(crate) struct Replace;

impl Handler for Replace {
    type Input = ReplaceInput;
    type Output = KnowledgeSourceOutput;

    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ReplaceInput) -> Result<Done<Self::Output>> {
        let (agent, source) = (agent_id(&input.agent_id)?, source_id(&input.source_id)?);
        input.submission.verify()?;
        let jobs = match knowledge::replace(conn, scope(ctx, agent)?, source, &input.submission).await? {
            Replaced::Candidate(job) => vec![job],
            Replaced::Unchanged => Vec::new(),
        };
        Ok(Done { jobs, ..read_back(ctx, conn, agent, source).await?.into() }.forgetting(Stale::Source(source)))
    }
}

pub(crate) struct Delete;

impl Handler for Delete {
    type Input = DeleteInput;
    type Output = DeleteOutput;

    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: DeleteInput) -> Result<Done<Self::Output>> {
        // Confirmation first: refused the same way whatever the call names.
        let confirmed = input.tombstone == Some(true)
            && input.prune == Some(true)
            && input.confirm.as_deref() == Some(input.source_id.as_str());
        if !confirmed {
            return Err(Problem::confirmation_required(
                "Deleting a Knowledge Source needs `tombstone: true`, `prune: true` and `confirm` equal to its id.",
            )
            .with_detail("sourceId", input.source_id.as_str())
            .into());
        }
        let (agent, source) = (agent_id(&input.agent_id)?, source_id(&input.source_id)?);
        knowledge::delete(conn, scope(ctx, agent)?, source).await?;
        let output = DeleteOutput { source_id: source.to_string(), deleted: True };
        Ok(Done::from(output).forgetting(Stale::Source(source)))
    }
}
