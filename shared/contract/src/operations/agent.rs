//! agent.list, .inspect, .create, .configure, .delete

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paged_input;
use crate::patch::Patch;
use crate::resources::{Agent, Language, SLUG_PATTERN};
use crate::schema::{True, not_null};

paged_input!(ListInput {});

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListOutput {
    pub agents: Vec<Agent>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InspectInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentOutput {
    pub agent: Agent,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateInput {
    #[schemars(length(min = 1, max = 120))]
    pub name: String,
    /// Unique within the Workspace; derived from the name when omitted.
    #[serde(default)]
    #[schemars(transform = not_null, length(max = 60), regex(pattern = SLUG_PATTERN))]
    pub slug: Option<String>,
    #[serde(default)]
    pub default_language: Language,
    #[serde(default)]
    #[schemars(transform = not_null, length(min = 1, max = 20000))]
    pub instructions: Option<String>,
    /// Sampling temperature of answers; 0.2 when omitted.
    #[serde(default)]
    #[schemars(transform = not_null, range(min = 0, max = 2))]
    pub temperature: Option<f64>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigureInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    #[serde(default)]
    #[schemars(transform = not_null, length(min = 1, max = 120))]
    pub name: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub default_language: Option<Language>,
    /// New instructions, or `null` to clear them.
    #[serde(default)]
    #[schemars(length(min = 1, max = 20000))]
    pub instructions: Patch<String>,
    #[serde(default)]
    #[schemars(transform = not_null, range(min = 0, max = 2))]
    pub temperature: Option<f64>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Must be `true`: deletion is destructive.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub confirm: Option<bool>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteOutput {
    pub agent_id: String,
    pub deleted: True,
}
