//! api_key.list, .create, .rotate, .revoke

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paged_input;
use crate::resources::ApiKey;
use crate::schema::not_null;
use crate::scope::{Preset, Scope};

paged_input!(ListInput {});

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListOutput {
    pub api_keys: Vec<ApiKey>,
}

/// Exactly one of `preset` or `scopes`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{ "required": ["preset"] }, { "required": ["scopes"] }]))]
pub struct CreateInput {
    #[schemars(length(min = 1, max = 50))]
    pub name: String,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub preset: Option<Preset>,
    #[serde(default)]
    #[schemars(transform = not_null, length(min = 1))]
    pub scopes: Option<Vec<Scope>>,
}

/// The key that create or rotate made, with its secret when this response made it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretOutput {
    pub api_key: ApiKey,
    /// The whole key, returned once; `null` on an idempotent replay.
    #[schemars(length(min = 1))]
    pub secret: Option<String>,
    pub secret_returned: bool,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RotateInput {
    #[schemars(length(min = 1))]
    pub api_key_id: String,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RevokeInput {
    #[schemars(length(min = 1))]
    pub api_key_id: String,
    /// Must be `true`: revocation cannot be undone.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub confirm: Option<bool>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiKeyOutput {
    pub api_key: ApiKey,
}
