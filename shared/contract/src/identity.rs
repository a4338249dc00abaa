//! The result of `identity.status`: who is calling, how, and against what.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resources::WorkspaceStatus;
use crate::scope::{Role, Scope};

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IdentityStatus {
    pub client: ClientInfo,
    pub auth: AuthInfo,
    pub user: Option<UserInfo>,
    pub workspace: Option<WorkspaceInfo>,
    /// The Workspace API key in use (never its secret); `null` for a User session.
    pub credential: Option<CredentialInfo>,
    pub availability: Availability,
    pub status: Ready,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientInfo {
    /// The version the client declared in `Svc-Client-Version`, or `unknown`.
    pub version: String,
    #[schemars(url)]
    pub endpoint: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    User,
    WorkspaceApiKey,
}

/// Where the client keeps its credential, as it declared in `Svc-Secret-Location`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecretLocation {
    OsStore,
    Environment,
    SecretFile,
    #[default]
    Unknown,
}

impl SecretLocation {
    pub fn parse(s: &str) -> SecretLocation {
        match s {
            "os_store" => Self::OsStore,
            "environment" => Self::Environment,
            "secret_file" => Self::SecretFile,
            _ => Self::Unknown,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthInfo {
    pub mode: AuthMode,
    pub secret_location: SecretLocation,
    /// When the credential expires: a UTC date-time ending in `Z`, or `null`.
    #[schemars(regex(pattern = r"Z$"), extend("format" = "date-time"))]
    pub expires_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UserInfo {
    pub id: String,
    #[schemars(email)]
    pub email: String,
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkspaceInfo {
    pub id: String,
    pub name: Option<String>,
    pub slug: Option<String>,
    pub role: Option<Role>,
    pub status: WorkspaceStatus,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialInfo {
    pub key_prefix: String,
    pub scopes: Vec<Scope>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Availability {
    pub api: bool,
    pub mcp: bool,
}

/// `status` of a successful `identity.status`: always `ready`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ready {
    #[default]
    Ready,
}
