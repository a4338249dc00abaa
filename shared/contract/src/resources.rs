//! The resources of the contract as they are returned (spec "Resources and their fields").
//!
//! Every output object denies unknown fields, so its schema says
//! `additionalProperties: false`: results carry no extra properties.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::Timestamp;
use crate::scope::{Preset, Role, Scope};

/// Pattern of Workspace and Agent slugs.
pub const SLUG_PATTERN: &str = r"^[a-z0-9]+(?:-[a-z0-9]+)*$";

/// Pattern of a content digest.
pub const DIGEST_PATTERN: &str = r"^sha256:[a-f0-9]{64}$";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceStatus {
    Active,
    Archived,
}

impl WorkspaceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Workspace {
    pub id: String,
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub slug: String,
    /// The caller's role; `null` for a Workspace API key.
    pub role: Option<Role>,
    pub status: WorkspaceStatus,
}

/// Language of an Agent's answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    #[default]
    En,
    Es,
}

impl Language {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::Es => "es",
        }
    }

    pub fn parse(s: &str) -> Option<Language> {
        [Self::En, Self::Es].into_iter().find(|l| l.as_str() == s)
    }
}

/// Only active Agents are returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    #[default]
    Active,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentConfiguration {
    pub instructions: Option<String>,
    pub temperature: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Agent {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub slug: String,
    pub status: AgentStatus,
    pub default_language: Language,
    pub configuration: AgentConfiguration,
}

/// Safe metadata of a Workspace API key: never the secret.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiKey {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    /// Non-secret prefix of the key (`svck_` and its public id).
    #[schemars(length(min = 1))]
    pub key_prefix: String,
    pub preset: Option<Preset>,
    pub scopes: Vec<Scope>,
    pub last_used_at: Option<Timestamp>,
    pub created_at: Timestamp,
    /// `null` while the key is active.
    pub revoked_at: Option<Timestamp>,
    /// Id of the key this one replaced.
    pub rotated_from_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntitlementChannels {
    pub allowed: Vec<String>,
    pub max_active: Option<u64>,
}

/// Plan, trial state, limits and usage of a Workspace.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Entitlement {
    pub workspace_id: String,
    pub plan: Option<String>,
    pub plan_name: Option<String>,
    pub status: String,
    pub active: bool,
    pub features: Vec<String>,
    pub limits: std::collections::BTreeMap<String, u64>,
    pub usage: std::collections::BTreeMap<String, u64>,
    pub channels: EntitlementChannels,
    pub trial_end: Option<Timestamp>,
    pub period_end: Option<Timestamp>,
    pub cancel_at_period_end: bool,
}
