//! knowledge_source.list, .inspect, .add, .wait, .reconcile, .replace, .delete

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paged_input;
use crate::Problem;
use crate::knowledge::{KnowledgeSource, MAX_CONTENT_BYTES, Provenance};
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

// Reviewed content with what it is: the fields `knowledge_source.add`,
// `.replace` and a reconcile manifest's upsert entry share, each input
// flattening it beside its own. (A plain comment: a doc comment would become
// the description of every input that flattens it.)
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
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
    #[schemars(length(min = 1, max = MAX_CONTENT_BYTES))]
    pub content: String,
}

impl Submission {
    /// `digest_mismatch` unless the digest is that of the content: checked
    /// before anything is stored.
    pub fn verify(&self) -> Result<(), Problem> {
        let actual = crate::digest::sha256_prefixed(self.content.as_bytes());
        if actual == self.digest {
            return Ok(());
        }
        Err(Problem::invalid("digest_mismatch", "`digest` is not the SHA-256 of `content`.")
            .with_detail("expected", actual))
    }

    /// The content's size, as `knowledge_bytes` counts it.
    pub fn bytes(&self) -> usize {
        self.content.len()
    }
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AddInput {
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Stable source key, unique among the Agent's live sources.
    #[schemars(length(min = 1, max = 160))]
    pub key: String,
    #[serde(flatten)]
    pub submission: Submission,
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
    #[serde(flatten)]
    pub submission: Submission,
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
    #[serde(flatten)]
    pub submission: Submission,
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::OperationId;

    /// The fields of a submission, from `op`'s input schema at `pointer`.
    fn submitted(op: OperationId, pointer: &str) -> Vec<(String, Value)> {
        let schema = Value::Object(op.operation().input_schema().clone());
        let object = schema.pointer(pointer).unwrap_or_else(|| panic!("{pointer} in {op:?}"));
        ["title", "provenance", "revision", "digest", "required", "content"]
            .into_iter()
            .map(|name| (name.to_owned(), object["properties"][name].clone()))
            .collect()
    }

    #[test]
    fn add_replace_and_upserts_state_a_submission_alike() {
        let add = submitted(OperationId::KnowledgeSourceAdd, "");
        let replace = submitted(OperationId::KnowledgeSourceReplace, "");
        let upsert =
            submitted(OperationId::KnowledgeSourceReconcile, "/properties/manifest/properties/sources/items/anyOf/1");
        assert_eq!(replace, add);
        assert_eq!(upsert, add);
        let content = &add.iter().find(|(name, _)| name == "content").unwrap().1;
        assert_eq!(content["maxLength"], json!(MAX_CONTENT_BYTES), "the bound in characters is the byte limit");
        let stated = MAX_CONTENT_BYTES.to_string();
        let (thousands, units) = stated.split_at(stated.len() - 3);
        assert!(
            content["description"].as_str().unwrap().contains(&format!("at most {thousands},{units} bytes")),
            "the description states the limit: {content}"
        );
    }

    #[test]
    fn a_submission_sits_beside_each_inputs_own_fields() {
        let entry = json!({ "key": "faq", "title": "FAQ", "provenance": { "kind": "manual", "uri": "notes" },
                            "revision": "1", "digest": "sha256:0", "content": "FAQ" });
        let ManifestEntry::Upsert(upsert) = serde_json::from_value(entry.clone()).unwrap() else {
            panic!("an upsert entry");
        };
        assert_eq!((upsert.key.as_str(), upsert.submission.title.as_str()), ("faq", "FAQ"));
        assert!(upsert.submission.required, "required by default");
        let mut add = entry.clone();
        add["agentId"] = json!("agt_1");
        let add: AddInput = serde_json::from_value(add).unwrap();
        assert_eq!(add.submission, upsert.submission);
        let mut extra = entry;
        extra["agentId"] = json!("agt_1");
        extra["colour"] = json!("red");
        assert!(serde_json::from_value::<AddInput>(extra).is_err(), "unknown fields are refused");
    }

    #[test]
    fn digests_are_checked_against_the_content() {
        let content = "Hello";
        let good = Submission {
            title: "t".into(),
            provenance: Provenance { kind: crate::knowledge::ProvenanceKind::Manual, uri: "u".into() },
            revision: "1".into(),
            digest: crate::digest::sha256_prefixed(content.as_bytes()),
            required: true,
            content: content.into(),
        };
        assert!(good.verify().is_ok());
        let bad = Submission { content: "Hello!".into(), ..good };
        let problem = bad.verify().unwrap_err();
        assert_eq!(problem.details.unwrap()["reason"], "digest_mismatch");
    }
}
