//! The call path shared by every surface (architecture "The path of one call"):
//! authenticate, validate, select the Workspace, check role or scope, archived
//! state and Entitlement, then run the handler with idempotency.

use serde_json::{Map, Value};
use sqlx::PgPool;
use svc_contract::identity::SecretLocation;
use svc_contract::{AuthKind, Operation, Problem, ProblemCode, WorkspaceRequirement};
use time::OffsetDateTime;

use crate::auth::jwt::JwtVerifier;
use crate::auth::{self, Credential};
use crate::caller::{Caller, Principal, Selection, User, WorkspaceContext};
use crate::config::CoreConfig;
use crate::error::Error;
use crate::ops;
use crate::store::callers::Selector;
use crate::validate::Validators;

/// What a client declares about itself (reported by `identity.status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHints {
    /// `Svc-Client-Version`.
    pub version: Option<String>,
    /// `Svc-Secret-Location`.
    pub secret_location: SecretLocation,
}

/// A successful call's result, before a surface renders it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub data: Value,
    pub next_cursor: Option<String>,
    /// The stored result of an earlier call with the same idempotency key.
    pub replayed: bool,
}

/// The domain: one per process, shared by every surface.
pub struct Service {
    pub(crate) pool: PgPool,
    pub(crate) config: CoreConfig,
    jwt: Option<JwtVerifier>,
    validators: Validators,
}

impl Service {
    pub fn new(pool: PgPool, config: CoreConfig) -> Result<Self, String> {
        let jwt = config.oidc.as_ref().map(JwtVerifier::new).transpose()?;
        Ok(Self { pool, config, jwt, validators: Validators::new()? })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// Checks the bearer credential of a request and resolves its Workspace
    /// selection (`Svc-Workspace`), which [`Service::call`] requires only for
    /// operations that need a Workspace.
    pub async fn authenticate(&self, authorization: Option<&str>, workspace: Option<&str>) -> Result<Caller, Problem> {
        let selector = Selector::parse(workspace);
        match auth::parse_bearer(authorization)? {
            Credential::Jwt(token) => self.authenticate_user(token, &selector).await,
            Credential::ApiKey(secret) => self.authenticate_key(secret, &selector).await,
        }
        .map_err(Error::into_problem)
    }

    async fn authenticate_user(&self, token: &str, selector: &Selector) -> crate::error::Result<Caller> {
        let verifier = self.jwt.as_ref().ok_or_else(|| {
            Problem::new(ProblemCode::AuthenticationRequired, "User sessions are not configured on this server.")
                .with_detail("reason", "sessions_disabled")
        })?;
        let token = verifier.verify(token).await?;
        let mut conn = self.pool.acquire().await?;
        let found =
            crate::store::callers::user_with_workspaces(&mut conn, &token.issuer, &token.subject, selector).await?;
        let Some((user, mut workspaces)) = found else {
            return Err(setup_required().into());
        };
        if let Some(revoked) = user.sessions_revoked_at {
            // Tokens issued at or before the second of revocation are void.
            if token.issued_at.is_none_or(|iat| iat <= revoked.unix_timestamp()) {
                return Err(Problem::new(
                    ProblemCode::ReauthenticationRequired,
                    "The session was revoked; sign in again.",
                )
                .with_detail("reason", "session_revoked")
                .into());
            }
        }
        if !user.setup_completed {
            return Err(setup_required().into());
        }
        let selection = match (selector.is_given(), workspaces.len()) {
            (_, 1) => Selection::Selected(Box::new(WorkspaceContext::from_row(workspaces.remove(0)))),
            (true, _) => Selection::Unknown,
            (false, _) => Selection::Ambiguous,
        };
        let expires_at = OffsetDateTime::from_unix_timestamp(token.expires_at).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let principal = Principal::User(User { id: user.id, email: user.email, name: user.name, expires_at });
        Ok(Caller { principal, selection })
    }

    async fn authenticate_key(&self, _secret: &str, _selector: &Selector) -> crate::error::Result<Caller> {
        Err(Problem::new(ProblemCode::AuthenticationRequired, "The API key is not valid.")
            .with_detail("reason", "unknown_api_key")
            .into())
    }

    /// Runs one operation for an authenticated caller. `input` is the request's
    /// JSON object (an empty body is `{}`).
    pub async fn call(
        &self,
        op: &'static Operation,
        caller: &Caller,
        mut input: Value,
        client: &ClientHints,
    ) -> Result<Reply, Problem> {
        self.validators.check(op, &input)?;
        let idempotency_key = take_idempotency_key(op, &mut input);
        let workspace = match op.workspace {
            WorkspaceRequirement::Required => Some(caller.selection.required()?),
            WorkspaceRequirement::Optional => caller.selection.optional()?,
            WorkspaceRequirement::None => None,
        };
        authorize(op, &caller.principal, workspace)?;
        let now = OffsetDateTime::now_utc();
        if let Some(ws) = workspace {
            if op.lists(ProblemCode::WorkspaceArchived) && ws.is_archived() {
                return Err(Problem::new(ProblemCode::WorkspaceArchived, "The Workspace is archived."));
            }
            if op.lists(ProblemCode::EntitlementRequired) && !ws.entitlement.is_active(now) {
                return Err(Problem::new(
                    ProblemCode::EntitlementRequired,
                    "The Workspace's plan does not allow this; its Entitlement is not active.",
                )
                .with_detail("status", ws.entitlement.status(now)));
            }
        }
        let ctx = ops::Ctx { service: self, caller, workspace, client, now };
        ops::dispatch(&ctx, op, input, idempotency_key).await.map_err(Error::into_problem)
    }
}

fn setup_required() -> Problem {
    Problem::new(ProblemCode::SetupRequired, "Finish signing up in the web application before using this client.")
}

/// `idempotencyKey` belongs to the call, not to the operation's input.
fn take_idempotency_key(op: &Operation, input: &mut Value) -> Option<String> {
    if !op.mutating {
        return None;
    }
    match input.as_object_mut().and_then(|object: &mut Map<String, Value>| object.remove("idempotencyKey")) {
        Some(Value::String(key)) => Some(key),
        _ => None,
    }
}

/// Role for Users, scope for API keys, from the catalog entry (contract §5).
fn authorize(op: &Operation, principal: &Principal, workspace: Option<&WorkspaceContext>) -> Result<(), Problem> {
    match principal {
        Principal::ApiKey(key) => {
            if !op.allows(AuthKind::WorkspaceApiKey) {
                return Err(Problem::permission_denied(
                    "This operation needs a User session; API keys cannot call it.",
                )
                .with_detail("reason", "user_session_required"));
            }
            if let Some(scope) = op.scope
                && !key.scopes.contains(&scope)
            {
                return Err(Problem::permission_denied(format!("The API key lacks the `{scope}` scope."))
                    .with_detail("reason", "missing_scope")
                    .with_detail("requiredScope", scope.as_str()));
            }
        }
        Principal::User(_) => {
            if let Some(ws) = workspace
                && ws.role.is_none_or(|role| role < op.min_role)
            {
                return Err(Problem::permission_denied(format!(
                    "This operation needs the {} role in the Workspace.",
                    op.min_role.as_str()
                ))
                .with_detail("reason", "role_required")
                .with_detail("requiredRole", op.min_role.as_str()));
            }
        }
    }
    Ok(())
}
