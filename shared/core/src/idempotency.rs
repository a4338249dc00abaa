//! One idempotency mechanism for every mutating operation (contract §7).
//!
//! Inside the mutation's transaction: take a non-waiting lock on (principal, key)
//! (held: another request with this key is running, `idempotency_conflict` with
//! reason `in_progress`), look the key up (same operation and input: replay the
//! stored result; anything else: `idempotency_conflict`), run the mutation, store
//! its result. Commit releases the lock after the record is visible, so a later
//! request replays; a failure rolls everything back, so nothing is stored.

use std::io::Write;

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use svc_contract::digest::write_canonical;
use svc_contract::{Problem, ProblemCode};
use uuid::Uuid;

use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::store;

/// How long a result is kept for replay.
pub const RETENTION_SECS: f64 = 24.0 * 60.0 * 60.0;

/// An idempotency key as one caller used it for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyKey {
    principal: Uuid,
    key: String,
    operation: &'static str,
    /// SHA-256 of the canonical input (without the key) and the Workspace.
    fingerprint: [u8; 32],
}

/// What claiming a key found.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// Never used (or expired): run the mutation.
    Fresh,
    /// Used before for this very call: answer with its stored result.
    Replay(Value),
}

impl IdempotencyKey {
    pub fn new(
        principal: Uuid,
        key: String,
        operation: &'static str,
        workspace: Option<WorkspaceId>,
        input: &Value,
    ) -> Self {
        Self { principal, key, operation, fingerprint: fingerprint(workspace, input) }
    }

    fn lock_id(&self) -> i64 {
        lock_id(self.principal, &self.key)
    }

    pub async fn claim(&self, conn: &mut PgConnection) -> Result<Claim> {
        if !store::advisory::try_lock(conn, self.lock_id()).await? {
            return Err(conflict("A request with this idempotency key is still running; retry shortly.")
                .with_detail("reason", "in_progress")
                .into());
        }
        let Some(record) = store::idempotency::find(conn, self.principal, &self.key, RETENTION_SECS).await? else {
            return Ok(Claim::Fresh);
        };
        if !record.live {
            return Ok(Claim::Fresh);
        }
        if record.operation == self.operation && record.fingerprint == self.fingerprint {
            Ok(Claim::Replay(record.response))
        } else {
            Err(conflict("This idempotency key was used for another operation or input.")
                .with_detail("reason", "key_reused")
                .into())
        }
    }

    /// Stores `response` for replays, in the caller's transaction.
    pub async fn record(&self, conn: &mut PgConnection, response: &Value) -> Result<()> {
        store::idempotency::upsert(conn, self.principal, &self.key, self.operation, &self.fingerprint, response)
            .await?;
        Ok(())
    }
}

/// The advisory lock id of (principal, key).
pub fn lock_id(principal: Uuid, key: &str) -> i64 {
    store::advisory::key(&[b"idempotency", principal.as_bytes(), key.as_bytes()])
}

/// SHA-256 of the canonical JSON of `{"input": input, "workspace": id or null}`,
/// written straight into the hasher: a 75 MB manifest is hashed, not copied.
fn fingerprint(workspace: Option<WorkspaceId>, input: &Value) -> [u8; 32] {
    let mut hasher = Sha256::new();
    let workspace = Value::from(workspace.map(|w| w.to_string()));
    // Writing into a hasher cannot fail. The keys are written in JCS order.
    let _ = hasher.write_all(b"{\"input\":");
    let _ = write_canonical(input, &mut hasher);
    let _ = hasher.write_all(b",\"workspace\":");
    let _ = write_canonical(&workspace, &mut hasher);
    let _ = hasher.write_all(b"}");
    hasher.finalize().into()
}

fn conflict(message: &'static str) -> Problem {
    Problem::new(ProblemCode::IdempotencyConflict, message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use svc_contract::digest::canonical_json;

    use super::*;

    /// The streamed fingerprint is the hash of the canonical JSON of the whole subject.
    #[test]
    fn fingerprint_hashes_the_canonical_subject() {
        let ws = WorkspaceId::new();
        let input = json!({"name": "a", "nested": {"z": 1, "a": [true, "x"]}});
        let subject = json!({"workspace": ws.to_string(), "input": input});
        let expected: [u8; 32] = Sha256::digest(canonical_json(&subject).as_bytes()).into();
        assert_eq!(fingerprint(Some(ws), &input), expected);
        let expected_none: [u8; 32] =
            Sha256::digest(canonical_json(&json!({"workspace": null, "input": input})).as_bytes()).into();
        assert_eq!(fingerprint(None, &input), expected_none);
    }

    #[test]
    fn fingerprint_ignores_key_order_but_not_values_or_workspace() {
        let principal = Uuid::now_v7();
        let ws = WorkspaceId::new();
        let a = IdempotencyKey::new(
            principal,
            "k".repeat(8),
            "agent.create",
            Some(ws),
            &json!({"name": "a", "temperature": 1}),
        );
        let b = IdempotencyKey::new(
            principal,
            "k".repeat(8),
            "agent.create",
            Some(ws),
            &json!({"temperature": 1, "name": "a"}),
        );
        let c = IdempotencyKey::new(
            principal,
            "k".repeat(8),
            "agent.create",
            Some(ws),
            &json!({"name": "b", "temperature": 1}),
        );
        let d = IdempotencyKey::new(
            principal,
            "k".repeat(8),
            "agent.create",
            None,
            &json!({"name": "a", "temperature": 1}),
        );
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_ne!(a.fingerprint, c.fingerprint);
        assert_ne!(a.fingerprint, d.fingerprint);
        assert_eq!(a.lock_id(), c.lock_id());
    }
}
