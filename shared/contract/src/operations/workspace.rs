//! workspace.list, .inspect, .create, .rename, .entitlements.inspect

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paged_input;
use crate::resources::{Entitlement, SLUG_PATTERN, Workspace};
use crate::schema::not_null;

pub use super::Empty as InspectInput;
pub use super::Empty as EntitlementsInspectInput;

paged_input!(ListInput {});

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListOutput {
    pub workspaces: Vec<Workspace>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkspaceOutput {
    pub workspace: Workspace,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateInput {
    #[schemars(length(min = 1, max = 120))]
    pub name: String,
    /// Unique slug; derived from the name when omitted.
    #[serde(default)]
    #[schemars(transform = not_null, length(max = 60), regex(pattern = SLUG_PATTERN))]
    pub slug: Option<String>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RenameInput {
    #[schemars(length(min = 1, max = 120))]
    pub name: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntitlementsInspectOutput {
    pub entitlement: Entitlement,
}
