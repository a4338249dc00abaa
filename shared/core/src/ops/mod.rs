//! Operation handlers: one type per operation, dispatched from the catalog id.
//!
//! A handler parses nothing and checks no permission: the call path has done both.
//! It reads or writes through the store and returns the contract's output type.
//! Mutations run in a transaction together with their idempotency record.

mod agent;
mod api_key;
mod identity;
mod workspace;

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use svc_contract::{Issue, Operation, OperationId, Problem, ProblemCode};
use time::OffsetDateTime;

use crate::caller::{Caller, Principal, WorkspaceContext};
use crate::entitlements::{self, LimitKey};
use crate::error::{Error, Result};
use crate::idempotency::{Claim, IdempotencyKey};
use crate::ids::UserId;
use crate::service::{ClientHints, Reply, Service};

/// What a handler knows about its call.
pub(crate) struct Ctx<'a> {
    pub service: &'a Service,
    pub caller: &'a Caller,
    pub workspace: Option<&'a WorkspaceContext>,
    pub client: &'a ClientHints,
    pub now: OffsetDateTime,
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
}

/// Makes room for `requested` more of `key` in the selected Workspace, in the
/// mutation's transaction: locks the Workspace row (so concurrent mutations are
/// counted one after another), checks again on it what the call path checked
/// before the transaction (an archive or plan change that committed in between
/// still fails closed), then checks the limit against current usage.
pub(crate) async fn reserve(ctx: &Ctx<'_>, conn: &mut PgConnection, key: LimitKey, requested: u64) -> Result<()> {
    let ws = ctx.workspace()?.id;
    let locked = crate::store::entitlements::lock(conn, ws).await?;
    if locked.archived {
        return Err(entitlements::workspace_archived().into());
    }
    if !locked.entitlement.is_active(ctx.now) {
        return Err(entitlements::entitlement_required(&locked.entitlement, ctx.now).into());
    }
    let usage = crate::store::entitlements::usage(conn, ws).await?;
    Ok(locked.entitlement.check_limit(key, usage.get(key), requested)?)
}

pub(crate) trait Handler {
    type Input: DeserializeOwned + Send;
    type Output: Respond + Send;

    fn handle(
        ctx: &Ctx<'_>,
        conn: &mut PgConnection,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output>> + Send;

    /// The form of a result kept for idempotent replays (secrets removed).
    fn for_replay(data: Value) -> Value {
        data
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
);

pub(crate) async fn dispatch(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    op: &'static Operation,
    input: Value,
    key: Option<String>,
) -> Result<Reply> {
    use OperationId::*;
    match op.op {
        IdentityStatus => read::<identity::Status>(ctx, conn, input).await,
        WorkspaceList => read::<workspace::List>(ctx, conn, input).await,
        WorkspaceInspect => read::<workspace::Inspect>(ctx, conn, input).await,
        WorkspaceCreate => mutate::<workspace::Create>(ctx, conn, op, input, key).await,
        WorkspaceRename => mutate::<workspace::Rename>(ctx, conn, op, input, key).await,
        WorkspaceEntitlementsInspect => read::<workspace::EntitlementsInspect>(ctx, conn, input).await,
        AgentList => read::<agent::List>(ctx, conn, input).await,
        AgentInspect => read::<agent::Inspect>(ctx, conn, input).await,
        AgentCreate => mutate::<agent::Create>(ctx, conn, op, input, key).await,
        AgentConfigure => mutate::<agent::Configure>(ctx, conn, op, input, key).await,
        AgentDelete => mutate::<agent::Delete>(ctx, conn, op, input, key).await,
        ApiKeyList => read::<api_key::List>(ctx, conn, input).await,
        ApiKeyCreate => mutate::<api_key::Create>(ctx, conn, op, input, key).await,
        ApiKeyRotate => mutate::<api_key::Rotate>(ctx, conn, op, input, key).await,
        ApiKeyRevoke => mutate::<api_key::Revoke>(ctx, conn, op, input, key).await,
        _ => Err(Problem::new(ProblemCode::InternalError, format!("`{}` is not available on this server yet.", op.id))
            .with_detail("reason", "not_implemented")
            .into()),
    }
}

fn parse<T: DeserializeOwned>(input: Value) -> Result<T> {
    // The schema has been checked, so this should not fail; if it does, say so
    // without quoting the input.
    serde_json::from_value(input).map_err(|_| {
        let message = "does not have the shape of this operation's input".to_owned();
        Problem::schema_violation(vec![Issue { path: String::new(), message }]).into()
    })
}

async fn read<H: Handler>(ctx: &Ctx<'_>, conn: &mut PgConnection, input: Value) -> Result<Reply> {
    let input = parse::<H::Input>(input)?;
    H::handle(ctx, conn, input).await?.respond()
}

async fn mutate<H: Handler>(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    op: &'static Operation,
    input: Value,
    key: Option<String>,
) -> Result<Reply> {
    let workspace = ctx.workspace.map(|w| w.id);
    let key = key.map(|k| IdempotencyKey::new(ctx.caller.principal.uuid(), k, op.id, workspace, &input));
    let input = parse::<H::Input>(input)?;
    let mut tx = conn.begin().await?;
    if let Some(key) = &key
        && let Claim::Replay(data) = key.claim(&mut tx).await?
    {
        return Ok(Reply { data, next_cursor: None, replayed: true });
    }
    let reply = H::handle(ctx, &mut tx, input).await?.respond()?;
    if let Some(key) = &key {
        key.record(&mut tx, &H::for_replay(reply.data.clone())).await?;
    }
    tx.commit().await?;
    Ok(reply)
}
