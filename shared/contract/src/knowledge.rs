//! Knowledge Sources, their revisions, and reconcile runs as returned.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resources::DIGEST_PATTERN;
use crate::schema::Timestamp;

/// Largest `content`, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 750_000;

/// Largest manifest of one reconcile.
pub const MAX_MANIFEST_SOURCES: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceKind {
    Repository,
    Url,
    Manual,
}

/// Where reviewed content came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provenance {
    pub kind: ProvenanceKind,
    #[schemars(length(min = 1, max = 2000))]
    pub uri: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    Pending,
    Processing,
    Active,
    Failed,
    Replacing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RevisionState {
    Pending,
    Processing,
    Active,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Revision {
    pub id: String,
    pub revision: String,
    #[schemars(regex(pattern = DIGEST_PATTERN))]
    pub digest: String,
    pub state: RevisionState,
    pub imported_at: Timestamp,
    pub error_code: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KnowledgeSource {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    /// Stable source key, unique among the Agent's live sources.
    pub key: String,
    pub title: String,
    pub provenance: Provenance,
    /// The caller's revision of the latest submitted content.
    pub revision: String,
    #[schemars(regex(pattern = DIGEST_PATTERN))]
    pub digest: String,
    pub required: bool,
    pub imported_at: Timestamp,
    pub state: SourceState,
    /// The revision answers use.
    pub active_revision: Option<Revision>,
    /// A candidate being processed, or the last failed one.
    pub pending_revision: Option<Revision>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileStatus {
    Planned,
    Applying,
    Completed,
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    Add,
    Noop,
    Replace,
    Delete,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanEntry {
    pub key: String,
    pub source_id: Option<String>,
    pub action: PlanAction,
}

/// The result of `knowledge_source.reconcile`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReconcileRun {
    /// `null` for a dry run, which stores nothing.
    pub run_id: Option<String>,
    pub status: ReconcileStatus,
    pub dry_run: bool,
    /// Applied plan entries, noops included.
    #[schemars(range(max = 9_007_199_254_740_991u64))]
    pub checkpoint: u64,
    #[schemars(length(min = 1))]
    pub error_code: Option<String>,
    pub plan: Vec<PlanEntry>,
    pub knowledge_sources: Vec<KnowledgeSource>,
}
