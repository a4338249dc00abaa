//! The call path shared by every surface (architecture "The path of one call"):
//! authenticate, validate, select the Workspace, check role or scope, archived
//! state and Entitlement, then run the handler with idempotency.

use std::sync::Arc;

use serde_json::{Map, Value};
use sqlx::PgPool;
use svc_contract::{AuthKind, Operation, Problem, ProblemCode, Scope, WorkspaceRequirement};
use time::OffsetDateTime;

use crate::answers::{Engine, Llm, Meaning};
use crate::auth::callers::{CallerCache, Fingerprint};
use crate::auth::jwt::JwtVerifier;
use crate::auth::{self, Credential, api_key};
use crate::call::{self, ClientHints, Reply, Shared};
use crate::caller::{Caller, KeyHolder, Principal, Selection, User, WorkspaceContext};
use crate::config::CoreConfig;
use crate::entitlements;
use crate::error::Error;
use crate::jobs::Queue;
use crate::listen_cache::Figures;
use crate::ops;
use crate::store::callers::Selector;

/// The domain: one per process, shared by every surface.
pub struct Service {
    /// What the handlers use too.
    shared: Shared,
    callers: CallerCache,
    jwt: Option<JwtVerifier>,
}

impl Service {
    /// The service over `pool`, enqueueing background jobs on `queue` (without
    /// one, jobs wait for the workers' sweeper).
    pub fn new(pool: PgPool, queue: Option<Queue>, config: CoreConfig) -> Result<Self, String> {
        let jwt = config.oidc.as_ref().map(JwtVerifier::new).transpose()?;
        let callers = CallerCache::new(config.caller_cache_entries, config.caller_cache_max_age);
        svc_contract::validate::compile_all()?;
        Ok(Self { shared: Shared::new(pool, queue, config), callers, jwt })
    }

    /// Answers come from `llm` (instead of being extractive).
    pub fn with_llm(mut self, llm: Option<Llm>) -> Self {
        self.shared.llm = llm;
        self
    }

    pub fn llm(&self) -> Option<&Llm> {
        self.shared.llm.as_ref()
    }

    /// Questions are searched by their meaning too, with `meaning`.
    pub fn with_meaning(mut self, meaning: Option<Meaning>) -> Self {
        self.shared.meaning = meaning;
        self
    }

    pub fn meaning(&self) -> Option<&Meaning> {
        self.shared.meaning.as_ref()
    }

    /// What answers questions: the pool, and the models when configured.
    pub fn engine(&self) -> Engine<'_> {
        self.shared.engine()
    }

    pub fn queue(&self) -> Option<&Queue> {
        self.shared.queue.as_ref()
    }

    /// Work still to be processed: revisions, their Workspaces, the oldest's age.
    pub async fn backlog_figures(&self) -> crate::error::Result<crate::store::knowledge::PendingWork> {
        let mut conn = crate::runtime::connection(&self.shared.pool).await?;
        Ok(crate::store::knowledge::backlog(&mut conn).await?)
    }

    /// Keeps the answers `knowledge_source.wait` reuses and the callers
    /// authentication reuses in step with PostgreSQL (see
    /// [`crate::listening`]); runs until dropped. Without it, every wait and
    /// every authentication reads PostgreSQL.
    pub async fn follow_changes(&self) {
        crate::listening::follow(&self.shared.pool, &self.shared.waits, &self.callers).await
    }

    /// `None` when the cache is off.
    pub fn wait_cache_figures(&self) -> Option<Figures> {
        (!self.shared.waits.is_off()).then(|| self.shared.waits.figures())
    }

    /// Drops every kept caller: a change through this process is seen by its
    /// next request, before PostgreSQL's notification arrives.
    fn forget_callers(&self) {
        self.callers.clear();
    }

    /// Limit-consuming writes waiting for a turn at their Workspace's gate
    /// right now (see [`crate::gates`]).
    pub fn gate_waiting(&self) -> usize {
        self.shared.gates.waiting()
    }

    /// `None` when the cache is off.
    pub fn caller_cache_figures(&self) -> Option<Figures> {
        (!self.callers.is_off()).then(|| self.callers.figures())
    }

    pub fn pool(&self) -> &PgPool {
        &self.shared.pool
    }

    /// Pooled connections kept warm for the next request right now (the pool
    /// counts them in use).
    pub fn warm_connections(&self) -> usize {
        self.shared.warm.kept()
    }

    pub fn config(&self) -> &CoreConfig {
        &self.shared.config
    }

    /// A session for one request: see [`Session`].
    pub fn session(&self) -> Session<'_> {
        Session { service: self, conn: self.shared.connection() }
    }

    /// Checks the bearer credential of a request and resolves its Workspace
    /// selection (`Svc-Workspace`), which [`Service::call`] requires only for
    /// operations that need a Workspace.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        workspace: Option<&str>,
    ) -> Result<Arc<Caller>, Problem> {
        self.session().authenticate(authorization, workspace).await
    }

    /// Runs one operation for an authenticated caller. `input` is the request's
    /// JSON object (an empty body is `{}`).
    pub async fn call(
        &self,
        op: &'static Operation,
        caller: &Caller,
        input: Value,
        client: &ClientHints,
    ) -> Result<Reply, Problem> {
        self.session().call(op, caller, input, client).await
    }
}

/// One request's use of the service. It takes a pooled database connection when
/// it first needs one and keeps it, so authentication and the call that follows
/// share it; [`Session::release`] hands it back early (before a slow upload).
pub struct Session<'a> {
    service: &'a Service,
    conn: call::Connection<'a>,
}

impl Session<'_> {
    /// Hands the connection back between steps (every step so far finished);
    /// the next step takes one again. It is kept warm for the next request
    /// (see [`crate::runtime::warm`]).
    pub fn release(&mut self) {
        self.conn.release();
    }

    /// See [`Service::authenticate`]. A caller authenticated a moment ago
    /// with the same credential and header is reused (see
    /// [`crate::auth::callers`]); a User's token is verified every time.
    pub async fn authenticate(
        &mut self,
        authorization: Option<&str>,
        workspace: Option<&str>,
    ) -> Result<Arc<Caller>, Problem> {
        let credential = auth::parse_bearer(authorization)?;
        let token = match credential {
            Credential::Jwt(token) => Some(self.verify(token).await?),
            Credential::ApiKey(_) => None,
        };
        let callers = &self.service.callers;
        let fingerprint = (!callers.is_off()).then(|| Fingerprint::of(credential.text(), workspace));
        if let Some(caller) = fingerprint.as_ref().and_then(|f| callers.get(f)) {
            return Ok(caller);
        }
        let ticket = fingerprint.and_then(|f| callers.ticket(f));
        let selector = Selector::parse(workspace);
        // Authentication only reads (and may touch a key's last use): a
        // connection that turned out dead is replaced and it runs again.
        let mut result = self.authenticate_once(&credential, token.as_deref(), &selector).await;
        if let Err(error) = &result
            && self.conn.lost_and_reconnected(error).await
        {
            result = self.authenticate_once(&credential, token.as_deref(), &selector).await;
        }
        let caller = Arc::new(result.map_err(Error::into_problem)?);
        if let Some(ticket) = ticket {
            callers.keep(ticket, caller.clone());
        }
        Ok(caller)
    }

    /// Checks a User's access token (before a connection is taken: a key
    /// fetch may be slow).
    async fn verify(&self, token: &str) -> Result<Arc<auth::jwt::VerifiedToken>, Problem> {
        let verifier = self.service.jwt.as_ref().ok_or_else(|| {
            Problem::new(ProblemCode::AuthenticationRequired, "User sessions are not configured on this server.")
                .with_detail("reason", "sessions_disabled")
        })?;
        verifier.verify(token).await
    }

    async fn authenticate_once(
        &mut self,
        credential: &Credential<'_>,
        token: Option<&auth::jwt::VerifiedToken>,
        selector: &Selector,
    ) -> crate::error::Result<Caller> {
        match (*credential, token) {
            (Credential::ApiKey(secret), _) => self.authenticate_key(secret, selector).await,
            (Credential::Jwt(_), Some(token)) => self.identify_user(token, selector).await,
            (Credential::Jwt(_), None) => Err(Error::internal("a token reached authentication unverified")),
        }
    }

    /// The caller of a User whose identity was established another way than a
    /// bearer token: the web application's session, started with a verified
    /// ID token (`issued_at`: when the session started). The same checks
    /// follow as for a token: setup, revoked sessions, Workspace selection.
    pub async fn authenticate_identity(
        &mut self,
        identity: &auth::jwt::VerifiedToken,
        workspace: Option<&str>,
    ) -> Result<Caller, Problem> {
        self.identify_user(identity, &Selector::parse(workspace)).await.map_err(Error::into_problem)
    }

    async fn identify_user(
        &mut self,
        token: &auth::jwt::VerifiedToken,
        selector: &Selector,
    ) -> crate::error::Result<Caller> {
        let service = self.service;
        let setup_required = || setup_required(&service.shared.config.public_base_url);
        let conn = self.conn.conn().await?;
        let found = crate::store::callers::user_with_workspaces(conn, &token.issuer, &token.subject, selector).await?;
        let Some((user, mut workspaces)) = found else { return Err(setup_required().into()) };
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

    async fn authenticate_key(&mut self, secret: &str, selector: &Selector) -> crate::error::Result<Caller> {
        let unknown = || {
            Problem::new(ProblemCode::AuthenticationRequired, "The API key is not valid.")
                .with_detail("reason", "unknown_api_key")
        };
        let public_id = api_key::public_id(secret).ok_or_else(unknown)?;
        let conn = self.conn.conn().await?;
        let (key, workspace) = crate::store::callers::key_with_workspace(conn, public_id).await?.ok_or_else(unknown)?;
        if !api_key::matches(secret, &key.secret_hash) {
            return Err(unknown().into());
        }
        if key.revoked_at.is_some() {
            return Err(Problem::new(
                ProblemCode::AuthenticationRequired,
                "The API key was revoked; a Workspace Admin can create a new one.",
            )
            .with_detail("reason", "api_key_revoked")
            .into());
        }
        let stale = key.last_used_at.is_none_or(|at| OffsetDateTime::now_utc() - at >= time::Duration::MINUTE);
        if stale {
            crate::store::api_keys::touch(conn, key.id).await?;
        }
        let selection = if selector.is_given() && !selector.names(workspace.id, &workspace.slug) {
            Selection::Foreign
        } else {
            Selection::Selected(Box::new(WorkspaceContext::from_row(workspace)))
        };
        let principal = Principal::ApiKey(KeyHolder {
            id: key.id,
            key_prefix: api_key::key_prefix(&key.public_id),
            scopes: key.scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
        });
        Ok(Caller { principal, selection })
    }

    /// See [`Service::call`].
    pub async fn call(
        &mut self,
        op: &'static Operation,
        caller: &Caller,
        mut input: Value,
        client: &ClientHints,
    ) -> Result<Reply, Problem> {
        let service = self.service;
        svc_contract::validate::check(op, &input)?;
        let idempotency_key = take_idempotency_key(op, &mut input);
        let workspace = match op.workspace {
            WorkspaceRequirement::Required => Some(caller.selection.required()?),
            WorkspaceRequirement::Optional => caller.selection.optional()?,
            WorkspaceRequirement::None => None,
        };
        authorize(op, &caller.principal, workspace)?;
        let now = OffsetDateTime::now_utc();
        if let Some(ws) = workspace {
            entitlements::admit(op, ws.is_archived(), &ws.entitlement, now)?;
        }
        let ctx = ops::Ctx { shared: &service.shared, caller, workspace, client, op, now, held: None };
        // widget.verify starts a conversation (counted against its quota) and
        // may call the model: run once, like a mutation.
        if op.mutating || op.op == svc_contract::OperationId::WidgetVerify {
            // A mutation retries only a failed BEGIN (see `ops::write`): once its
            // transaction has started, a lost connection leaves its outcome
            // unknown, and the client retries with the same idempotency key.
            let result =
                ops::dispatch(&ctx, &mut self.conn, op, input, idempotency_key).await.map_err(Error::into_problem);
            if result.is_ok() {
                // Its transaction is committed: the connection is clean.
                self.release();
                if changes_callers(op) {
                    // This process's next request must not use a caller from
                    // before (other processes hear of it from PostgreSQL).
                    service.forget_callers();
                }
            }
            return result;
        }
        // A read whose connection turned out dead runs once more on a live one.
        let again = input.clone();
        let mut result = ops::dispatch(&ctx, &mut self.conn, op, input, None).await;
        if let Err(error) = &result
            && self.conn.lost_and_reconnected(error).await
        {
            result = ops::dispatch(&ctx, &mut self.conn, op, again, None).await;
        }
        if result.is_ok() {
            // Every query of the read finished: the connection is clean.
            self.release();
        }
        result.map_err(Error::into_problem)
    }
}

/// Whether a successful `op` may change what authentication finds (a key
/// revoked or rotated, a Workspace created, renamed or archived, a member's
/// role changed, a member removed or joined).
fn changes_callers(op: &Operation) -> bool {
    use svc_contract::OperationId::{InviteAccept, MemberRemove, MemberSetRole};
    let membership = matches!(op.op, MemberSetRole | MemberRemove | InviteAccept);
    op.mutating && (op.id.starts_with("workspace.") || op.id.starts_with("api_key.") || membership)
}

/// Where a User finishes signing up: the web application of this server.
pub fn account_url(public_base_url: &str) -> String {
    format!("{public_base_url}/account")
}

/// Names the web application in the message and in `details.setupUrl`, so
/// every surface (and the CLI, which prints both) tells the User where to go.
fn setup_required(public_base_url: &str) -> Problem {
    let url = account_url(public_base_url);
    Problem::new(
        ProblemCode::SetupRequired,
        format!("Finish signing up in the web application at {url} before using this client."),
    )
    .with_detail("setupUrl", url)
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

#[cfg(test)]
mod tests {
    use svc_contract::OperationId;
    use svc_contract::catalog::every_operation;

    use super::*;

    /// Every write that may change what authentication finds drops the
    /// callers kept, the web application's membership changes included.
    #[test]
    fn writes_that_change_callers_forget_them() {
        let forgetting: Vec<&str> = every_operation().filter(|op| changes_callers(op)).map(|op| op.id).collect();
        assert_eq!(
            forgetting,
            [
                "workspace.create",
                "workspace.rename",
                "api_key.create",
                "api_key.rotate",
                "api_key.revoke",
                "member.set_role",
                "member.remove",
                "invite.accept"
            ]
        );
        assert!(!changes_callers(OperationId::MemberInvite.operation()), "an invite changes nobody's access yet");
    }
    use crate::runtime::sizes::{future_of_1, future_of_3, future_of_5};

    /// A request's futures are moved and copied whole as they are built,
    /// boxed and awaited: none holds the room of sqlx's acquire future
    /// (8.6 kB in a release build), which is boxed where a request may
    /// await it.
    #[test]
    #[allow(clippy::disallowed_methods, reason = "its size, not a call")]
    fn a_requests_futures_are_smaller_than_sqlxs_acquire() {
        let acquire = future_of_1(PgPool::acquire);
        let call = future_of_5(Service::call);
        let authenticate = future_of_3(Session::authenticate);
        assert!(call < acquire, "Service::call: {call} bytes, acquire {acquire}");
        assert!(authenticate < acquire, "Session::authenticate: {authenticate} bytes, acquire {acquire}");
    }
}
