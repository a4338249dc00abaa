//! Who a request's credential is, and which Workspace it selects, in one round trip.

use serde_json::Value;
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::ids::{UserId, WorkspaceId};

/// How a request names its Workspace (the `Svc-Workspace` header).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// No header.
    None,
    Id(WorkspaceId),
    Slug(String),
    /// A header that can name no Workspace (malformed id or slug).
    Nothing,
}

impl Selector {
    pub fn parse(header: Option<&str>) -> Self {
        let Some(value) = header.map(str::trim) else {
            return Self::None;
        };
        if value.starts_with(WorkspaceId::PREFIX) {
            return WorkspaceId::parse(value).map_or(Self::Nothing, Self::Id);
        }
        if crate::slug::is_valid(value) { Self::Slug(value.to_owned()) } else { Self::Nothing }
    }

    pub fn is_given(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// Whether this names the Workspace with `id` and `slug`.
    pub fn names(&self, id: WorkspaceId, slug: &str) -> bool {
        match self {
            Self::Id(wanted) => *wanted == id,
            Self::Slug(wanted) => wanted == slug,
            Self::None | Self::Nothing => false,
        }
    }

    fn id(&self) -> Option<Uuid> {
        match self {
            Self::Id(id) => Some(id.0),
            _ => None,
        }
    }

    fn slug(&self) -> Option<&str> {
        match self {
            Self::Slug(slug) => Some(slug),
            _ => None,
        }
    }
}

/// A Workspace as seen by a caller, with what authorization needs.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceAccessRow {
    pub id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub status: String,
    /// The caller's role (`None` for an API key).
    pub role: Option<String>,
    pub plan: String,
    pub trial_end: Option<OffsetDateTime>,
    pub period_end: Option<OffsetDateTime>,
    pub cancel_at_period_end: bool,
    pub limit_overrides: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UserCallerRow {
    pub id: UserId,
    pub email: String,
    pub name: Option<String>,
    pub setup_completed: bool,
    pub sessions_revoked_at: Option<OffsetDateTime>,
}

/// The User with this identity and the Workspaces the selector picks among theirs:
/// the named one, or without a selector up to two (two means "ambiguous").
#[tracing::instrument(skip(conn))]
pub async fn user_with_workspaces(
    conn: &mut PgConnection,
    issuer: &str,
    subject: &str,
    selector: &Selector,
) -> sqlx::Result<Option<(UserCallerRow, Vec<WorkspaceAccessRow>)>> {
    let rows = sqlx::query!(
        r#"
        SELECT u.id AS "user_id: UserId", u.email, u.name AS user_name,
               u.setup_completed_at IS NOT NULL AS "setup_completed!", u.sessions_revoked_at,
               w.id AS "workspace_id?: WorkspaceId", w.name AS "workspace_name?", w.slug AS "slug?",
               w.status AS "status?", w.role AS "role?", w.plan AS "plan?", w.trial_end, w.period_end,
               w.cancel_at_period_end AS "cancel_at_period_end?", w.limit_overrides AS "limit_overrides?"
        FROM users u
        LEFT JOIN LATERAL (
            SELECT ws.id, ws.name, ws.slug, ws.status, m.role, e.plan, e.trial_end, e.period_end,
                   e.cancel_at_period_end, e.limit_overrides
            FROM memberships m
            JOIN workspaces ws ON ws.id = m.workspace_id
            JOIN entitlements e ON e.workspace_id = ws.id
            WHERE m.user_id = u.id AND (NOT $3 OR ws.id = $4 OR ws.slug = $5)
            ORDER BY ws.id
            LIMIT 2
        ) w ON true
        WHERE u.issuer = $1 AND u.subject = $2
        "#,
        issuer,
        subject,
        selector.is_given(),
        selector.id(),
        selector.slug(),
    )
    .fetch_all(conn)
    .await?;

    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let user = UserCallerRow {
        id: first.user_id,
        email: first.email.clone(),
        name: first.user_name.clone(),
        setup_completed: first.setup_completed,
        sessions_revoked_at: first.sessions_revoked_at,
    };
    let workspaces = rows
        .into_iter()
        .filter_map(|r| {
            Some(WorkspaceAccessRow {
                id: r.workspace_id?,
                name: r.workspace_name?,
                slug: r.slug?,
                status: r.status?,
                role: r.role,
                plan: r.plan?,
                trial_end: r.trial_end,
                period_end: r.period_end,
                cancel_at_period_end: r.cancel_at_period_end?,
                limit_overrides: r.limit_overrides?,
            })
        })
        .collect();
    Ok(Some((user, workspaces)))
}
