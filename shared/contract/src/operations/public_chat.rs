//! public_chat.inspect, .enable, .disable, .url

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chat::{PublicChat, URL_PATTERN};
use crate::patch::Patch;
use crate::schema::not_null;

/// The input of operations that name only an Agent.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicChatOutput {
    pub public_chat: PublicChat,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnableInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// The tenant's website (absolute `http`/`https` URL), or `null` to clear it.
    #[serde(default)]
    #[schemars(length(min = 1, max = 2000), url, regex(pattern = URL_PATTERN))]
    pub website: Patch<String>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DisableInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Must equal `agentId` exactly.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub confirm: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UrlOutput {
    pub agent_id: String,
    #[schemars(url)]
    pub url: String,
}
