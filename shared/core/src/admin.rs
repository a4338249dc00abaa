//! Operator commands (contract §10): sign-up, sessions, membership, plans and
//! archiving are outside the public catalog. Each returns the JSON object the
//! command prints.

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_contract::Role;
use svc_contract::resources::WorkspaceStatus;
use time::OffsetDateTime;

use crate::entitlements::{LimitKey, PERIOD_LENGTH, Plan, TRIAL_LENGTH};
use crate::store;
use crate::store::callers::Selector;
use crate::store::users::UserRow;
use crate::store::workspaces::WorkspaceRow;
use crate::timestamp::millis;

/// An operator command's failure: the message it prints.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

type Result<T> = std::result::Result<T, AdminError>;

fn user_json(user: &UserRow) -> Value {
    json!({
        "id": user.id.to_string(),
        "issuer": user.issuer,
        "subject": user.subject,
        "email": user.email,
        "name": user.name,
        "setupCompleted": user.setup_completed_at.is_some(),
        "sessionsRevokedAt": user.sessions_revoked_at.map(millis),
    })
}

fn workspace_json(ws: &WorkspaceRow) -> Value {
    let status = WorkspaceStatus::from(ws.status);
    json!({ "id": ws.id.to_string(), "name": ws.name, "slug": ws.slug, "status": status.as_str() })
}

async fn workspace(pool: &PgPool, name: &str) -> Result<WorkspaceRow> {
    let mut conn = crate::runtime::connection(pool).await?;
    let found = match Selector::parse(Some(name)) {
        Selector::Id(id) => store::workspaces::find(&mut conn, Some(id), None).await?,
        Selector::Slug(slug) => store::workspaces::find(&mut conn, None, Some(&slug)).await?,
        Selector::None | Selector::Nothing => None,
    };
    found.ok_or_else(|| AdminError::Invalid(format!("no Workspace with id or slug `{name}`")))
}

pub async fn user_setup(pool: &PgPool, issuer: &str, subject: &str, email: &str, name: Option<&str>) -> Result<Value> {
    if !svc_contract::validate::is_email(email) {
        return Err(AdminError::Invalid(format!("`{email}` is not an e-mail address")));
    }
    let mut conn = crate::runtime::connection(pool).await?;
    let user = store::users::complete_setup(&mut conn, issuer, subject, email, name).await?;
    Ok(json!({ "user": user_json(&user) }))
}

pub async fn user_revoke_sessions(pool: &PgPool, issuer: &str, subject: &str) -> Result<Value> {
    let mut conn = crate::runtime::connection(pool).await?;
    let user = store::users::revoke_sessions(&mut conn, issuer, subject)
        .await?
        .ok_or_else(|| AdminError::Invalid(format!("no User {issuer} {subject}")))?;
    Ok(json!({ "user": user_json(&user) }))
}

pub async fn member_add(pool: &PgPool, workspace_name: &str, issuer: &str, subject: &str, role: &str) -> Result<Value> {
    let role = Role::parse(role)
        .ok_or_else(|| AdminError::Invalid(format!("role must be owner, admin or member, not `{role}`")))?;
    let ws = workspace(pool, workspace_name).await?;
    let mut conn = crate::runtime::connection(pool).await?;
    let user = store::users::find_by_identity(&mut conn, issuer, subject)
        .await?
        .ok_or_else(|| AdminError::Invalid(format!("no User {issuer} {subject}; run user-setup first")))?;
    store::workspaces::set_member(&mut conn, ws.id, user.id, role.into()).await?;
    Ok(json!({ "workspaceId": ws.id.to_string(), "userId": user.id.to_string(), "role": role.as_str() }))
}

/// Parses `KEY=N` limit overrides.
pub fn parse_limits(pairs: &[String]) -> Result<serde_json::Map<String, Value>> {
    let mut limits = serde_json::Map::new();
    for pair in pairs {
        let (key, value) = pair.split_once('=').ok_or_else(|| AdminError::Invalid(format!("`{pair}` is not KEY=N")))?;
        let key = LimitKey::parse(key).ok_or_else(|| {
            let keys: Vec<&str> = LimitKey::ALL.iter().map(|k| k.as_str()).collect();
            AdminError::Invalid(format!("unknown limit `{key}`; one of {}", keys.join(", ")))
        })?;
        let value: u64 = value.parse().map_err(|_| AdminError::Invalid(format!("`{value}` is not a whole number")))?;
        limits.insert(key.as_str().to_owned(), value.into());
    }
    Ok(limits)
}

/// Sets a Workspace's plan: `trial` starts a fresh 14-day trial, `starter` and
/// `pro` a 30-day period, `expired` ends access. Overrides replace plan limits.
pub async fn plan_set(pool: &PgPool, workspace_name: &str, plan: &str, limits: &[String]) -> Result<Value> {
    let plan = Plan::parse(plan)
        .ok_or_else(|| AdminError::Invalid(format!("plan must be trial, starter, pro or expired, not `{plan}`")))?;
    let overrides = parse_limits(limits)?;
    let ws = workspace(pool, workspace_name).await?;
    let now = OffsetDateTime::now_utc();
    let (trial_end, period_end) = match plan {
        Plan::Trial => (Some(now + TRIAL_LENGTH), None),
        Plan::Starter | Plan::Pro => (None, Some(now + PERIOD_LENGTH)),
        Plan::Expired => (None, None),
    };
    let mut conn = crate::runtime::connection(pool).await?;
    store::entitlements::set_plan(&mut conn, ws.id, plan.as_str(), trial_end, period_end, &Value::Object(overrides))
        .await?;
    let entitlement = store::entitlements::get(&mut conn, ws.id).await?;
    Ok(json!({
        "workspaceId": ws.id.to_string(),
        "plan": plan.as_str(),
        "status": entitlement.status(now),
        "active": entitlement.is_active(now),
        "limits": entitlement.limits(),
        "trialEnd": entitlement.trial_end.map(millis),
        "periodEnd": entitlement.period_end.map(millis),
    }))
}

pub async fn set_archived(pool: &PgPool, workspace_name: &str, archived: bool) -> Result<Value> {
    let ws = workspace(pool, workspace_name).await?;
    let mut conn = crate::runtime::connection(pool).await?;
    let status = if archived { WorkspaceStatus::Archived } else { WorkspaceStatus::Active };
    let ws = store::workspaces::set_status(&mut conn, ws.id, status.into()).await?;
    Ok(json!({ "workspace": workspace_json(&ws) }))
}
