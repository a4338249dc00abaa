//! Operation handlers, and the runner that gives each the database access its
//! policy names.
//!
//! A handler parses nothing and checks no permission: the call path has done
//! both. It reads or writes through the store and the domain modules and
//! returns the contract's output type. [`dispatch`] names every operation with
//! the runner it needs, so an operation without a handler does not compile:
//!
//! - [`read`]: a plain connection, no transaction.
//! - [`detached`]: no connection from the call; the handler takes pooled ones
//!   while it needs them (widget.verify, which waits on the answer engine).
//! - [`write`]: one transaction with the idempotency record; the selected
//!   Workspace is held (FOR SHARE) and its archive state and Entitlement checked
//!   again under that lock (by the runner, or by a handler that takes the hold
//!   in its own first statement: knowledge_source.add); a handler that
//!   consumes a limit waits its turn at the Workspace's gate (a few per
//!   Workspace at once) before it takes a connection; jobs the handler returns
//!   are enqueued after the commit. A handler with a one-statement form
//!   (knowledge_source.add) tries it first, outside a transaction, when the
//!   call has no idempotency key ([`Handler::handle_alone`]).

mod agent;
mod api_key;
mod identity;
mod knowledge;
mod member;
mod public_chat;
mod reconcile;
mod widget;
mod workspace;

use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use svc_contract::{Issue, Operation, OperationId, Problem};
use time::OffsetDateTime;

use crate::call::{self, ClientHints, Reply, Shared};
use crate::caller::{Caller, Principal, WorkspaceContext};
use crate::entitlements::{self, Entitlement};
use crate::error::{Error, Result};
use crate::idempotency::{Claim, IdempotencyKey};
use crate::ids::UserId;
use crate::jobs::Job;
use crate::knowledge::waits::Stale;
use crate::store::types::StoredWorkspaceStatus;
use crate::store::usage::Delta;
use crate::store::workspaces::Held;

/// What a handler knows about its call.
pub(crate) struct Ctx<'a> {
    pub shared: &'a Shared,
    pub caller: &'a Caller,
    pub workspace: Option<&'a WorkspaceContext>,
    pub client: &'a ClientHints,
    pub op: &'static Operation,
    pub now: OffsetDateTime,
    /// The selected Workspace's Entitlement as read under a mutation's lock.
    pub held: Option<Entitlement>,
}

impl Ctx<'_> {
    /// The selected Workspace of an operation that requires one.
    pub fn workspace(&self) -> Result<&WorkspaceContext> {
        self.workspace.ok_or_else(|| Error::internal("handler of a Workspace operation called without one"))
    }

    /// The calling User of an operation only User sessions may call.
    pub fn user_id(&self) -> Result<UserId> {
        match &self.caller.principal {
            Principal::User(user) => Ok(user.id),
            Principal::ApiKey(_) => Err(Error::internal("User-only operation called with an API key")),
        }
    }

    /// `workspace_archived` or `entitlement_required` when the Workspace, as
    /// the mutation holds it, no longer admits the call.
    pub fn admit(&self, held: &Held) -> Result<()> {
        self.admit_as(held.status, &held.entitlement)
    }

    /// As [`Ctx::admit`], for the Workspace in `status` under `entitlement`.
    pub fn admit_as(&self, status: StoredWorkspaceStatus, entitlement: &Entitlement) -> Result<()> {
        let archived = status == StoredWorkspaceStatus::Archived;
        Ok(entitlements::admit(self.op, archived, entitlement, self.now)?)
    }
}

/// Holds the selected Workspace FOR SHARE until the transaction ends (an
/// archive or plan change waits for the mutation, or is seen by it) and admits
/// the call under it; the Entitlement held.
async fn hold(ctx: &Ctx<'_>, conn: &mut PgConnection) -> Result<Entitlement> {
    let held = crate::store::workspaces::hold(conn, ctx.workspace()?.id).await?;
    ctx.admit(&held)?;
    Ok(held.entitlement)
}

/// Grows the selected Workspace's usage by `delta` within its limits, as they
/// stood when the mutation took the Workspace's lock (`limit_exceeded`, and
/// nothing written, otherwise). The usage row stays locked until the commit:
/// call it after the handler's other writes (see `store::usage`).
pub(crate) async fn reserve(ctx: &Ctx<'_>, conn: &mut PgConnection, delta: &Delta) -> Result<()> {
    let ws = ctx.workspace()?;
    crate::store::usage::reserve_within_limits(conn, ws.id, ctx.held.as_ref().unwrap_or(&ws.entitlement), delta).await
}

/// How a mutation's transaction treats the selected Workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lock {
    /// Held FOR SHARE and checked again (archived, Entitlement).
    Shared,
    /// As `Shared`, and the call consumes a limit: it first waits its turn at the
    /// Workspace's gate, holding no pooled connection while it waits, so one
    /// Workspace's flood of writes cannot take the whole pool. Its usage is
    /// counted on the Workspace's usage row, where such writes queue in
    /// PostgreSQL anyway: it takes two places at the gate (half as many of them
    /// go in at once).
    Limited,
    /// As `Limited`, but all it grows is counted on the usage shards, where
    /// writes of one Workspace do not wait for each other: it takes one place.
    /// (Now and then it takes the usage row too, when the shards' room has to
    /// be shared out again: a Workspace's first add, after a limit change,
    /// near a limit; see `store::usage::shards`.)
    Sharded,
}

impl Lock {
    /// The places at its Workspace's gate a write takes, if it waits there.
    fn places(self) -> Option<usize> {
        match self {
            Lock::Shared => None,
            Lock::Limited => Some(2),
            Lock::Sharded => Some(1),
        }
    }
}

/// A handler's result: its output, and what follows once what it wrote has
/// committed: the jobs to enqueue, and the kept `wait` answers to forget.
pub(crate) struct Done<T> {
    pub output: T,
    pub jobs: Vec<Job>,
    pub stale: Stale,
}

impl<T> From<T> for Done<T> {
    fn from(output: T) -> Self {
        Self { output, jobs: Vec::new(), stale: Stale::Nothing }
    }
}

impl<T> Done<T> {
    /// The same, also forgetting what the write made stale.
    pub fn forgetting(self, stale: Stale) -> Self {
        Self { stale, ..self }
    }
}

pub(crate) trait Handler {
    type Input: DeserializeOwned + Send;
    type Output: Respond + Send;

    /// How a mutation holds the Workspace (ignored by reads).
    const LOCK: Lock = Lock::Shared;

    /// Whether the mutation holds the selected Workspace itself, in its first
    /// statement, and admits the call under it ([`Ctx::admit`]) before it
    /// reports anything else: the round trip of the runner's own hold saved.
    const HOLDS_WORKSPACE: bool = false;

    fn handle(
        ctx: &Ctx<'_>,
        conn: &mut PgConnection,
        input: Self::Input,
    ) -> impl Future<Output = Result<Done<Self::Output>>> + Send;

    /// A mutation that can, in its common case, be one statement that
    /// commits by itself (no `BEGIN`, no `COMMIT`: two round trips fewer)
    /// tries that first when the call has no idempotency key: `Some` when it
    /// wrote, `None` when it wrote nothing and [`Handler::handle`] runs in the
    /// transaction. A lost connection leaves its outcome unknown: `handle`
    /// then runs on a fresh one, and must recognise what the attempt wrote.
    fn handle_alone(
        _ctx: &Ctx<'_>,
        _conn: &mut PgConnection,
        _input: &Self::Input,
    ) -> impl Future<Output = Result<Option<Done<Self::Output>>>> + Send {
        std::future::ready(Ok(None))
    }

    /// The form of a result kept for idempotent replays (secrets removed).
    fn for_replay(data: Value) -> Value {
        data
    }

    /// What a replay answers, from what [`Handler::for_replay`] kept: the stored
    /// result itself, unless the operation answers with live state.
    fn replay(_ctx: &Ctx<'_>, _conn: &mut PgConnection, stored: Value) -> impl Future<Output = Result<Value>> + Send {
        std::future::ready(Ok(stored))
    }
}

/// How an output becomes the `data` (and `nextCursor`) of a reply.
pub(crate) trait Respond {
    fn respond(self) -> Result<Reply>;
}

/// One page of a list and the cursor of the next, if more remain.
pub(crate) struct Page<T> {
    pub data: T,
    pub next_cursor: Option<String>,
}

impl<T: Serialize> Respond for Page<T> {
    fn respond(self) -> Result<Reply> {
        let data = serde_json::to_value(self.data).map_err(|e| Error::internal(e.to_string()))?;
        Ok(Reply { data, next_cursor: self.next_cursor, replayed: false })
    }
}

macro_rules! respond_with_data {
    ($($output:ty),* $(,)?) => {
        $(impl Respond for $output {
            fn respond(self) -> Result<Reply> {
                let data = serde_json::to_value(self).map_err(|e| Error::internal(e.to_string()))?;
                Ok(Reply { data, next_cursor: None, replayed: false })
            }
        })*
    };
}

use svc_contract::operations as out;
respond_with_data!(
    svc_contract::identity::IdentityStatus,
    out::workspace::WorkspaceOutput,
    out::workspace::EntitlementsInspectOutput,
    out::agent::AgentOutput,
    out::agent::DeleteOutput,
    out::api_key::SecretOutput,
    out::api_key::ApiKeyOutput,
    out::knowledge_source::KnowledgeSourceOutput,
    out::knowledge_source::WaitOutput,
    out::knowledge_source::DeleteOutput,
    svc_contract::knowledge::ReconcileRun,
    out::public_chat::PublicChatOutput,
    out::public_chat::UrlOutput,
    out::widget::ConfigurationOutput,
    out::widget::ManifestOutput,
    out::widget::VerifyOutput,
    out::member::ListOutput,
    out::member::InvitesOutput,
    out::member::InviteOutput,
    out::member::MemberOutput,
    out::member::RemovedOutput,
    out::member::AcceptOutput,
);

/// Every operation (the catalog's and the web application's), with the
/// runner its policy needs.
pub(crate) async fn dispatch(
    ctx: &Ctx<'_>,
    session: &mut call::Connection<'_>,
    op: &'static Operation,
    input: Value,
    key: Option<String>,
) -> Result<Reply> {
    use OperationId::*;
    // Each runs in its own allocation, sized for it: one future sized for the
    // largest operation, moved down the call path, would be copied on every call.
    let call: BoxFuture<'_, Result<Reply>> = match op.op {
        IdentityStatus => read::<identity::Status>(ctx, session, op, input).boxed(),
        WorkspaceList => read::<workspace::List>(ctx, session, op, input).boxed(),
        WorkspaceInspect => read::<workspace::Inspect>(ctx, session, op, input).boxed(),
        WorkspaceCreate => write::<workspace::Create>(ctx, session, op, input, key).boxed(),
        WorkspaceRename => write::<workspace::Rename>(ctx, session, op, input, key).boxed(),
        WorkspaceEntitlementsInspect => read::<workspace::EntitlementsInspect>(ctx, session, op, input).boxed(),
        AgentList => read::<agent::List>(ctx, session, op, input).boxed(),
        AgentInspect => read::<agent::Inspect>(ctx, session, op, input).boxed(),
        AgentCreate => write::<agent::Create>(ctx, session, op, input, key).boxed(),
        AgentConfigure => write::<agent::Configure>(ctx, session, op, input, key).boxed(),
        AgentDelete => write::<agent::Delete>(ctx, session, op, input, key).boxed(),
        ApiKeyList => read::<api_key::List>(ctx, session, op, input).boxed(),
        ApiKeyCreate => write::<api_key::Create>(ctx, session, op, input, key).boxed(),
        ApiKeyRotate => write::<api_key::Rotate>(ctx, session, op, input, key).boxed(),
        ApiKeyRevoke => write::<api_key::Revoke>(ctx, session, op, input, key).boxed(),
        KnowledgeSourceList => read::<knowledge::List>(ctx, session, op, input).boxed(),
        KnowledgeSourceInspect => read::<knowledge::Inspect>(ctx, session, op, input).boxed(),
        KnowledgeSourceAdd => write::<knowledge::Add>(ctx, session, op, input, key).boxed(),
        KnowledgeSourceWait => read::<knowledge::Wait>(ctx, session, op, input).boxed(),
        KnowledgeSourceReplace => write::<knowledge::Replace>(ctx, session, op, input, key).boxed(),
        KnowledgeSourceDelete => write::<knowledge::Delete>(ctx, session, op, input, key).boxed(),
        KnowledgeSourceReconcile => write::<reconcile::Reconcile>(ctx, session, op, input, key).boxed(),
        PublicChatInspect => read::<public_chat::Inspect>(ctx, session, op, input).boxed(),
        PublicChatEnable => write::<public_chat::Enable>(ctx, session, op, input, key).boxed(),
        PublicChatDisable => write::<public_chat::Disable>(ctx, session, op, input, key).boxed(),
        PublicChatUrl => read::<public_chat::Url>(ctx, session, op, input).boxed(),
        WidgetInspect => read::<widget::Inspect>(ctx, session, op, input).boxed(),
        WidgetConfigure => write::<widget::Configure>(ctx, session, op, input, key).boxed(),
        WidgetManifest => read::<widget::Manifest>(ctx, session, op, input).boxed(),
        WidgetVerify => detached(session, op, widget::verify(ctx, parse(input)?)).boxed(),
        MemberList => read::<member::List>(ctx, session, op, input).boxed(),
        MemberInvite => write::<member::MakeInvite>(ctx, session, op, input, key).boxed(),
        MemberSetRole => write::<member::SetRole>(ctx, session, op, input, key).boxed(),
        MemberRemove => write::<member::Remove>(ctx, session, op, input, key).boxed(),
        InviteList => read::<member::Invites>(ctx, session, op, input).boxed(),
        InviteAccept => write::<member::Accept>(ctx, session, op, input, key).boxed(),
    };
    call.await
}

fn parse<T: DeserializeOwned>(input: Value) -> Result<T> {
    // The schema has been checked, so this should not fail; if it does, say so
    // without quoting the input.
    serde_json::from_value(input).map_err(|_| {
        let message = "does not have the shape of this operation's input".to_owned();
        Problem::schema_violation(vec![Issue { path: String::new(), message }]).into()
    })
}

/// Runs a read-only handler on the session's connection.
async fn read<H: Handler>(
    ctx: &Ctx<'_>,
    session: &mut call::Connection<'_>,
    op: &'static Operation,
    input: Value,
) -> Result<Reply> {
    if op.mutating {
        return Err(Error::internal(format!("{} mutates but was dispatched as a read", op.id)));
    }
    let input = parse::<H::Input>(input)?;
    let conn = session.conn().await?;
    H::handle(ctx, conn, input).await?.output.respond()
}

/// Runs a read-only handler that takes pooled connections itself, only while
/// it uses them, because it also waits on something slow (a model): the
/// session's connection is returned first.
async fn detached<T: Respond>(
    session: &mut call::Connection<'_>,
    op: &'static Operation,
    handler: impl Future<Output = Result<T>>,
) -> Result<Reply> {
    if op.mutating {
        return Err(Error::internal(format!("{} mutates but was dispatched as a detached read", op.id)));
    }
    session.release();
    handler.await?.respond()
}

/// What a write's transaction produced.
enum Written {
    Fresh(Reply, Vec<Job>, Stale),
    Replayed(Value),
}

/// Runs a mutation in one transaction with its idempotency record (see the
/// module documentation), or, without a key, as the handler's one statement
/// when it has one and can ([`Handler::handle_alone`]). The transaction is
/// committed or rolled back before this returns, on every path: a lock it
/// took (the idempotency key's among them) is never left to a background
/// rollback.
async fn write<H: Handler>(
    ctx: &Ctx<'_>,
    session: &mut call::Connection<'_>,
    op: &'static Operation,
    input: Value,
    key: Option<String>,
) -> Result<Reply> {
    if !op.mutating {
        return Err(Error::internal(format!("{} is read-only but was dispatched as a write", op.id)));
    }
    let workspace = ctx.workspace.map(|w| w.id);
    let key = key.map(|k| IdempotencyKey::new(ctx.caller.principal.uuid(), k, op.id, workspace, &input));
    let input = parse::<H::Input>(input)?;
    let _turn = match (H::LOCK.places(), workspace) {
        (Some(places), Some(ws)) => {
            session.release();
            Some(ctx.shared.gates.enter(ws, places).await?)
        }
        _ => None,
    };
    // A connection found dead at BEGIN did nothing yet: replaced once. Past
    // BEGIN, a lost connection leaves the outcome unknown: the client retries
    // with its idempotency key.
    let mut retried = false;
    if key.is_none() {
        match H::handle_alone(ctx, session.conn().await?, &input).await {
            Ok(Some(done)) => {
                committed(ctx, session, done.jobs, done.stale).await;
                return done.output.respond();
            }
            Ok(None) => {}
            // Its outcome unknown: the transaction finds what it wrote.
            Err(lost) => {
                retried = true;
                if !session.lost_and_reconnected(&lost).await {
                    return Err(lost);
                }
            }
        }
    }
    let mut tx = loop {
        let lost = match session.conn().await?.begin().await {
            Ok(tx) => break tx,
            Err(error) if !retried && crate::error::fault(&error) == crate::error::Fault::ConnectionLost => {
                Error::from(error)
            }
            Err(error) => return Err(error.into()),
        };
        retried = true;
        if !session.lost_and_reconnected(&lost).await {
            return Err(lost);
        }
    };
    let result = async {
        if let Some(key) = &key
            && let Claim::Replay(stored) = key.claim(&mut tx).await?
        {
            return Ok(Written::Replayed(H::replay(ctx, &mut tx, stored).await?));
        }
        let held_ctx;
        let ctx = match ctx.workspace {
            Some(_) if !H::HOLDS_WORKSPACE => {
                held_ctx = Ctx { held: Some(hold(ctx, &mut tx).await?), ..*ctx };
                &held_ctx
            }
            _ => ctx,
        };
        let done = H::handle(ctx, &mut tx, input).await?;
        let reply = done.output.respond()?;
        if let Some(key) = &key {
            key.record(&mut tx, &H::for_replay(reply.data.clone())).await?;
        }
        Ok::<_, Error>(Written::Fresh(reply, done.jobs, done.stale))
    }
    .await;
    match result {
        Ok(Written::Fresh(reply, jobs, stale)) => {
            tx.commit().await?;
            committed(ctx, session, jobs, stale).await;
            Ok(reply)
        }
        Ok(Written::Replayed(data)) => {
            if !rolled_back(tx).await {
                session.discard().await;
            }
            Ok(Reply { data, next_cursor: None, replayed: true })
        }
        Err(error) => {
            if !rolled_back(tx).await {
                session.discard().await;
            }
            Err(error)
        }
    }
}

/// What follows a write's commit: the kept `wait` answers it made stale are
/// forgotten and its jobs enqueued.
async fn committed(ctx: &Ctx<'_>, session: &mut call::Connection<'_>, jobs: Vec<Job>, stale: Stale) {
    ctx.shared.waits.forget(stale);
    if !jobs.is_empty() {
        // Redis may be slow or down: no pooled connection waits on it.
        session.release();
        ctx.shared.enqueue(&jobs).await;
    }
}

/// Rolls a transaction back now; `false` when that failed, which leaves the
/// connection in an unknown state (the caller closes it).
async fn rolled_back(tx: sqlx::Transaction<'_, sqlx::Postgres>) -> bool {
    match tx.rollback().await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "rollback failed; closing the connection");
            false
        }
    }
}
