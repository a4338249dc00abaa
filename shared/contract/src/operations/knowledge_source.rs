//! knowledge_source.list, .inspect, .add, .wait, .reconcile, .replace, .delete

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paged_input;
use crate::knowledge::{KnowledgeSource, Provenance};
use crate::resources::DIGEST_PATTERN;
use crate::schema::{False, True, not_null};

paged_input!(ListInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
});

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListOutput {
    pub knowledge_sources: Vec<KnowledgeSource>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    #[schemars(length(min = 1))]
    pub source_id: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KnowledgeSourceOutput {
    pub knowledge_source: KnowledgeSource,
}

fn default_true() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AddInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Stable source key, unique among the Agent's live sources.
    #[schemars(length(min = 1, max = 160))]
    pub key: String,
    #[schemars(length(min = 1, max = 240))]
    pub title: String,
    pub provenance: Provenance,
    /// The caller's revision of this content (e.g. a commit id).
    #[schemars(length(min = 1, max = 200))]
    pub revision: String,
    /// `sha256:` and the hex SHA-256 of the UTF-8 bytes of `content`.
    #[schemars(regex(pattern = DIGEST_PATTERN))]
    pub digest: String,
    /// Whether answers need this source active.
    #[serde(default = "default_true")]
    pub required: bool,
    /// Reviewed UTF-8 text, at most 750,000 bytes.
    #[schemars(length(min = 1, max = 750_000))]
    pub content: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitOutput {
    pub knowledge_source: KnowledgeSource,
    /// True when no revision is pending or processing.
    pub terminal: bool,
    /// When to ask again; `null` once terminal.
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub retry_after_ms: Option<u64>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplaceInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    #[schemars(length(min = 1))]
    pub source_id: String,
    #[schemars(length(min = 1, max = 240))]
    pub title: String,
    pub provenance: Provenance,
    #[schemars(length(min = 1, max = 200))]
    pub revision: String,
    #[schemars(regex(pattern = DIGEST_PATTERN))]
    pub digest: String,
    #[serde(default = "default_true")]
    pub required: bool,
    /// Reviewed UTF-8 text, at most 750,000 bytes.
    #[schemars(length(min = 1, max = 750_000))]
    pub content: String,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    #[schemars(length(min = 1))]
    pub source_id: String,
    /// Must be `true`.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub tombstone: Option<bool>,
    /// Must be `true`.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub prune: Option<bool>,
    /// Must equal `sourceId` exactly.
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub confirm: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteOutput {
    pub source_id: String,
    pub deleted: True,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReconcileInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    pub manifest: Manifest,
    /// Only plan (the default); `false` applies the plan.
    #[serde(default = "default_true")]
    pub dry_run: bool,
    /// Allow tombstone entries to delete sources.
    #[serde(default)]
    pub prune: bool,
}

/// The desired Knowledge of an Agent, by source key.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    #[schemars(extend("const" = 1))]
    pub version: ManifestVersion,
    #[schemars(length(max = 100))]
    pub sources: Vec<ManifestEntry>,
}

/// The manifest format version: `1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(with = "u64")]
pub struct ManifestVersion;

impl<'de> Deserialize<'de> for ManifestVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match super::whole_number(deserializer)? {
            1 => Ok(Self),
            _ => Err(serde::de::Error::custom("the manifest version must be 1")),
        }
    }
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ManifestEntry {
    Tombstone(TombstoneEntry),
    Upsert(UpsertEntry),
}

impl ManifestEntry {
    pub fn key(&self) -> &str {
        match self {
            Self::Tombstone(entry) => &entry.key,
            Self::Upsert(entry) => &entry.key,
        }
    }
}

/// A source that should exist with this content.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpsertEntry {
    #[schemars(length(min = 1, max = 160))]
    pub key: String,
    #[schemars(length(min = 1, max = 240))]
    pub title: String,
    pub provenance: Provenance,
    #[schemars(length(min = 1, max = 200))]
    pub revision: String,
    #[schemars(regex(pattern = DIGEST_PATTERN))]
    pub digest: String,
    #[serde(default = "default_true")]
    pub required: bool,
    /// Reviewed UTF-8 text, at most 750,000 bytes.
    #[schemars(length(min = 1, max = 750_000))]
    pub content: String,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub tombstone: Option<False>,
}

/// A source that should be deleted (needs `prune` and `confirm`).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TombstoneEntry {
    #[schemars(length(min = 1, max = 160))]
    pub key: String,
    pub tombstone: True,
    /// Must equal the id of the source being deleted.
    #[serde(default)]
    #[schemars(transform = not_null, length(min = 1))]
    pub confirm: Option<String>,
}
