//! The authenticated caller of one request and the Workspace it selected.

use svc_contract::resources::WorkspaceStatus;
use svc_contract::{Problem, ProblemCode, Role, Scope};
use time::OffsetDateTime;

use crate::entitlements::Entitlement;
use crate::ids::{ApiKeyId, UserId, WorkspaceId};
use crate::store::callers::WorkspaceAccessRow;

/// A signed-in User.
#[derive(Clone, Debug, PartialEq)]
pub struct User {
    pub id: UserId,
    pub email: String,
    pub name: Option<String>,
    /// When the access token expires.
    pub expires_at: OffsetDateTime,
}

/// A Workspace API key in use.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyHolder {
    pub id: ApiKeyId,
    pub key_prefix: String,
    pub scopes: Vec<Scope>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Principal {
    User(User),
    ApiKey(KeyHolder),
}

impl Principal {
    /// The id idempotency records are scoped to.
    pub fn uuid(&self) -> uuid::Uuid {
        match self {
            Self::User(user) => user.id.0,
            Self::ApiKey(key) => key.id.0,
        }
    }
}

/// A Workspace as the caller sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceContext {
    pub id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub status: WorkspaceStatus,
    /// The caller's role; `None` for an API key.
    pub role: Option<Role>,
    pub entitlement: Entitlement,
}

impl WorkspaceContext {
    pub fn from_row(row: WorkspaceAccessRow) -> Self {
        let entitlement = Entitlement::from_row(
            &row.plan,
            row.trial_end,
            row.period_end,
            row.cancel_at_period_end,
            &row.limit_overrides,
        );
        Self {
            id: row.id,
            name: row.name,
            slug: row.slug,
            status: row.status.into(),
            role: row.role.map(Into::into),
            entitlement,
        }
    }

    pub fn is_archived(&self) -> bool {
        self.status == WorkspaceStatus::Archived
    }

    /// The Workspace resource as this caller sees it.
    pub fn resource(&self) -> svc_contract::resources::Workspace {
        svc_contract::resources::Workspace {
            id: self.id.to_string(),
            name: self.name.clone(),
            slug: self.slug.clone(),
            role: self.role,
            status: self.status,
        }
    }
}

/// What the request's Workspace selection resolved to (contract §4).
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    Selected(Box<WorkspaceContext>),
    /// No header, and the User has no Workspace or more than one.
    Ambiguous,
    /// The header names no Workspace the User belongs to (or none at all).
    Unknown,
    /// An API key's request names a Workspace other than the key's.
    Foreign,
}

impl Selection {
    /// The Workspace an operation that requires one acts on.
    pub fn required(&self) -> Result<&WorkspaceContext, Problem> {
        match self {
            Self::Selected(ws) => Ok(ws),
            Self::Ambiguous => Err(Problem::new(
                ProblemCode::WorkspaceSelectionRequired,
                "Select a Workspace with the Svc-Workspace header (id or slug).",
            )
            .with_detail("reason", "ambiguous")),
            Self::Unknown => Err(unknown_workspace()),
            Self::Foreign => Err(foreign_workspace()),
        }
    }

    /// The Workspace for an operation where it is optional.
    pub fn optional(&self) -> Result<Option<&WorkspaceContext>, Problem> {
        match self {
            Self::Selected(ws) => Ok(Some(ws)),
            Self::Ambiguous => Ok(None),
            Self::Unknown => Err(unknown_workspace()),
            Self::Foreign => Err(foreign_workspace()),
        }
    }
}

fn unknown_workspace() -> Problem {
    Problem::new(ProblemCode::WorkspaceSelectionRequired, "No Workspace of yours has that id or slug.")
        .with_detail("reason", "unknown_workspace")
}

fn foreign_workspace() -> Problem {
    Problem::permission_denied("A Workspace API key acts only on its own Workspace.")
        .with_detail("reason", "foreign_workspace")
}

/// An authenticated request's caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    pub principal: Principal,
    pub selection: Selection,
}
