//! The web application's domain (`/account`): browser sessions, sign-ins under
//! way, first-time setup and the rules of Workspace membership (invites,
//! roles, removal).
//!
//! Setup goes through the same code as `svc-api admin user-setup`
//! ([`crate::admin::user_setup`]); Workspaces and API keys go through the
//! catalog's operations with the User as caller, so their rules hold
//! unchanged. Membership goes through the same call path with operations of
//! its own (`svc_contract::catalog::ACCOUNT`, handled by `ops::member`): the
//! call path checks the least role, makes the calls idempotent and drops the
//! callers kept; what only membership knows (who may give which role, the
//! last owner) is here, run in the call's transaction.

use sqlx::{PgConnection, PgPool};
use svc_contract::{Problem, Role};
use time::{Duration, OffsetDateTime};

use crate::auth::jwt::{IdToken, VerifiedToken};
use crate::auth::relying_party::{random_token, token_hash};
use crate::error::{Error, Result};
use crate::ids::{UserId, WorkspaceId};
use crate::store;
use crate::store::invites::InviteRow;
use crate::store::types::StoredRole;
use crate::store::web_sessions::{NewWebSession, SignInRow, WebSessionRow};

/// How long a browser session lasts (absolute: no sliding renewal).
pub const SESSION_LIFETIME: Duration = Duration::hours(8);
/// How long a sign-in may take at the provider.
pub const SIGN_IN_LIFETIME: Duration = Duration::minutes(10);
/// How long an invite link can be used.
pub const INVITE_LIFETIME: Duration = Duration::days(7);

/// A started browser session: `token` goes into the cookie, and only there.
pub struct StartedSession {
    pub token: String,
    pub session: WebSessionRow,
}

/// Starts a session for the identity an ID token vouched for.
pub async fn start_session(pool: &PgPool, id: &IdToken) -> Result<StartedSession> {
    let token = random_token().map_err(|e| Error::internal(format!("no randomness: {e}")))?;
    let hash = token_hash(&token);
    let email = id.email.clone().unwrap_or_default();
    let new = NewWebSession {
        token_hash: &hash,
        issuer: &id.issuer,
        subject: &id.subject,
        email: &email,
        name: id.name.as_deref(),
        expires_at: OffsetDateTime::now_utc() + SESSION_LIFETIME,
    };
    let mut conn = crate::runtime::connection(pool).await?;
    let session = store::web_sessions::insert(&mut conn, &new).await?;
    Ok(StartedSession { token, session })
}

/// The live session the cookie's token names.
pub async fn session(pool: &PgPool, token: &str) -> Result<Option<WebSessionRow>> {
    let mut conn = crate::runtime::connection(pool).await?;
    Ok(store::web_sessions::find(&mut conn, &token_hash(token)).await?)
}

pub async fn end_session(pool: &PgPool, token: &str) -> Result<()> {
    let mut conn = crate::runtime::connection(pool).await?;
    Ok(store::web_sessions::delete(&mut conn, &token_hash(token)).await?)
}

/// What the call path checks of a session: its identity, and when it started
/// (so `svc-api admin user-revoke-sessions` ends it like any token).
pub fn identity(session: &WebSessionRow) -> VerifiedToken {
    VerifiedToken {
        issuer: session.issuer.clone(),
        subject: session.subject.clone(),
        issued_at: Some(session.created_at.unix_timestamp()),
        expires_at: session.expires_at.unix_timestamp(),
    }
}

/// Records a sign-in under way, bound to the browser holding `binding`.
pub async fn begin_sign_in(pool: &PgPool, binding: &str, sign_in: &SignInRow) -> Result<()> {
    let mut conn = crate::runtime::connection(pool).await?;
    let expires = OffsetDateTime::now_utc() + SIGN_IN_LIFETIME;
    Ok(store::web_sessions::insert_sign_in(&mut conn, &token_hash(binding), sign_in, expires).await?)
}

/// The sign-in under way of the browser holding `binding`, spent.
pub async fn take_sign_in(pool: &PgPool, binding: &str) -> Result<Option<SignInRow>> {
    let mut conn = crate::runtime::connection(pool).await?;
    Ok(store::web_sessions::take_sign_in(&mut conn, &token_hash(binding)).await?)
}

/// Finishes first-time setup: exactly `svc-api admin user-setup`, with the
/// e-mail address the identity provider gave, or `typed_email` where it gave
/// none (neither in the ID token nor from UserInfo).
pub async fn finish_setup(pool: &PgPool, session: &WebSessionRow, name: &str, typed_email: &str) -> Result<()> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 120 {
        return Err(Problem::invalid("name", "Give a name of 1 to 120 characters.").into());
    }
    let email = if session.email.is_empty() { typed_email.trim() } else { session.email.as_str() };
    if !svc_contract::validate::is_email(email) {
        return Err(Problem::invalid("email", "Give your e-mail address.").into());
    }
    crate::admin::user_setup(pool, &session.issuer, &session.subject, email, Some(name)).await.map_err(|error| {
        match error {
            crate::admin::AdminError::Invalid(message) => Problem::invalid("setup", message).into(),
            crate::admin::AdminError::Database(error) => Error::from(error),
        }
    })?;
    Ok(())
}

/// The slug a new Workspace of this name would get now (the same derivation
/// and `-2`, `-3` ... as workspace.create).
pub async fn preview_slug(pool: &PgPool, name: &str) -> Result<String> {
    let base = crate::slug::derive(name, "workspace");
    let mut conn = crate::runtime::connection(pool).await?;
    let taken = store::workspaces::slugs_like(&mut conn, &base).await?;
    let mut n = 1;
    loop {
        let candidate = crate::slug::candidate(&base, n);
        if !taken.contains(&candidate) {
            return Ok(candidate);
        }
        n += 1;
    }
}

/// An actor no longer an owner or admin once the members are locked.
fn manager_required() -> Error {
    Problem::permission_denied("Only a Workspace owner or admin manages its members.")
        .with_detail("reason", "role_required")
        .with_detail("requiredRole", "admin")
        .into()
}

/// Only an owner hands out or takes away the owner role.
fn may_grant(by: Role, role: Role) -> Result<()> {
    if role == Role::Owner && by != Role::Owner {
        return Err(Problem::permission_denied("Only an owner gives or takes the owner role.")
            .with_detail("reason", "role_required")
            .with_detail("requiredRole", "owner")
            .into());
    }
    Ok(())
}

/// A created invite: `token` is shown once, in the link to copy.
pub struct CreatedInvite {
    pub token: String,
    pub expires_at: OffsetDateTime,
}

/// Makes an invite of `ws` with `role`, by a User whose role there is `by`.
pub async fn invite(conn: &mut PgConnection, ws: WorkspaceId, by: (UserId, Role), role: Role) -> Result<CreatedInvite> {
    may_grant(by.1, role)?;
    let token = random_token().map_err(|e| Error::internal(format!("no randomness: {e}")))?;
    let expires_at = OffsetDateTime::now_utc() + INVITE_LIFETIME;
    store::invites::insert(conn, ws, &token_hash(&token), role.into(), by.0, expires_at).await?;
    Ok(CreatedInvite { token, expires_at })
}

/// The open invite a token names (unused, unexpired).
pub async fn open_invite(pool: &PgPool, token: &str) -> Result<Option<InviteRow>> {
    let mut conn = crate::runtime::connection(pool).await?;
    Ok(store::invites::find_open(&mut conn, &token_hash(token)).await?)
}

fn invite_not_open() -> Error {
    Problem::invalid("invite_not_open", "This invite link was used already, has expired, or does not exist.").into()
}

/// Spends the invite and makes `user` a member with its role, in the call's
/// transaction: a link joins one User, once. Someone already a member keeps
/// their role (the invite is spent all the same).
pub async fn accept_invite(conn: &mut PgConnection, user: UserId, token: &str) -> Result<InviteRow> {
    let invite = store::invites::spend(conn, &token_hash(token), user).await?.ok_or_else(invite_not_open)?;
    store::members::add_if_absent(conn, invite.workspace_id, user, invite.role).await?;
    Ok(invite)
}

/// Under the members' lock: the acting User's role as it stands now (an admin
/// demoted since their request was authenticated manages nobody), the
/// target's current role, and the owners there are.
async fn locked_roles(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    actor: UserId,
    target: UserId,
) -> Result<(Role, Role, usize)> {
    let roles = store::members::lock_roles(conn, workspace).await?;
    let by = roles.iter().find(|(id, _)| *id == actor).map(|(_, role)| Role::from(*role));
    let by = match by {
        Some(role) if role >= Role::Admin => role,
        _ => return Err(manager_required()),
    };
    let current = roles
        .iter()
        .find(|(id, _)| *id == target)
        .map(|(_, role)| Role::from(*role))
        .ok_or_else(|| Error::from(Problem::not_found("member")))?;
    let owners = roles.iter().filter(|(_, role)| *role == StoredRole::Owner).count();
    Ok((by, current, owners))
}

fn last_owner() -> Error {
    Problem::invalid("last_owner", "A Workspace keeps at least one owner: make someone else owner first.").into()
}

/// Gives `target` the role `role`, as `actor` (whose role is read again
/// under the members' lock).
pub async fn change_role(
    conn: &mut PgConnection,
    ws: WorkspaceId,
    actor: UserId,
    target: UserId,
    role: Role,
) -> Result<()> {
    let (by, current, owners) = locked_roles(conn, ws, actor, target).await?;
    may_grant(by, role)?;
    may_grant(by, current)?;
    if current == Role::Owner && role != Role::Owner && owners <= 1 {
        return Err(last_owner());
    }
    store::workspaces::set_member(conn, ws, target, role.into()).await?;
    Ok(())
}

/// Removes `target` from `ws`, as `actor` (whose role is read again under
/// the members' lock).
pub async fn remove_member(conn: &mut PgConnection, ws: WorkspaceId, actor: UserId, target: UserId) -> Result<()> {
    let (by, current, owners) = locked_roles(conn, ws, actor, target).await?;
    may_grant(by, current)?;
    if current == Role::Owner && owners <= 1 {
        return Err(last_owner());
    }
    store::members::remove(conn, ws, target).await?;
    Ok(())
}
