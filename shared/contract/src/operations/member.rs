//! The web application's membership operations (`catalog::ACCOUNT`):
//! member.list, member.invite, member.set_role, member.remove, invite.list,
//! invite.accept. No part of the public catalog; typed here so that they pass
//! the same call path (and its validation) as the catalog's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{Timestamp, True};
use crate::scope::Role;

pub use super::Empty as ListInput;
pub use super::Empty as InvitesInput;

/// A member of the selected Workspace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Member {
    pub user_id: String,
    pub email: String,
    pub name: Option<String>,
    pub role: Role,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListOutput {
    pub members: Vec<Member>,
}

/// An invite not yet used and not expired. Its code is never shown again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Invite {
    pub role: Role,
    pub expires_at: Timestamp,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InvitesOutput {
    pub invites: Vec<Invite>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InviteInput {
    /// The role the invited User joins with; only an owner invites an owner.
    pub role: Role,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InviteOutput {
    pub invite: Invite,
    /// The invite's code, shown once: `null` in a replay of the call.
    pub token: Option<String>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetRoleInput {
    #[schemars(length(min = 1))]
    pub user_id: String,
    pub role: Role,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveInput {
    #[schemars(length(min = 1))]
    pub user_id: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemberOutput {
    pub user_id: String,
    pub role: Role,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemovedOutput {
    pub user_id: String,
    pub removed: True,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AcceptInput {
    /// The invite's code, from its link.
    #[schemars(length(min = 1, max = 200))]
    pub token: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AcceptOutput {
    pub workspace_id: String,
    pub role: Role,
}
