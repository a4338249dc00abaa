//! widget.inspect, .configure, .manifest, .verify

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chat::{ORIGIN_PATTERN, WidgetConfiguration, WidgetConfigurationPatch};

pub use super::public_chat::AgentInput;
pub use crate::chat::WidgetManifest as ManifestOutput;

/// The question `widget.verify` asks when none is given.
pub const DEFAULT_VERIFY_QUESTION: &str = "What can you help me with?";

fn default_question() -> String {
    DEFAULT_VERIFY_QUESTION.to_owned()
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigurationOutput {
    pub agent_id: String,
    pub configuration: WidgetConfiguration,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigureInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    pub configuration: WidgetConfigurationPatch,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// The origin the Widget will be embedded on.
    #[schemars(regex(pattern = ORIGIN_PATTERN))]
    pub origin: String,
    #[serde(default = "default_question")]
    #[schemars(length(min = 1, max = 2000))]
    pub question: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyChecks {
    pub agent: bool,
    pub configuration: bool,
    pub origin: bool,
    pub knowledge: bool,
    pub public_chat: bool,
    pub answer: bool,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyOutput {
    pub agent_id: String,
    pub origin: String,
    pub configuration: WidgetConfiguration,
    pub checks: VerifyChecks,
    #[schemars(length(min = 1))]
    pub answer: String,
}
