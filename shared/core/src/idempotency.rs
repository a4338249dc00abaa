//! One idempotency mechanism for every mutating operation (contract §7).
//!
//! Inside the mutation's transaction: take a non-waiting lock on (principal, key)
//! (held: another request with this key is running, `idempotency_conflict` with
//! reason `in_progress`), look the key up (same operation and input: replay the
//! stored result; anything else: `idempotency_conflict`), run the mutation, store
//! its result. Commit releases the lock after the record is visible, so a later
//! request replays; a failure rolls everything back, so nothing is stored.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use svc_contract::digest::canonical_json;
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
        let subject = json!({ "workspace": workspace.map(|w| w.to_string()), "input": input });
        let fingerprint = Sha256::digest(canonical_json(&subject).as_bytes()).into();
        Self { principal, key, operation, fingerprint }
    }

    fn lock_id(&self) -> i64 {
        lock_id(self.principal, &self.key)
    }

    pub async fn claim(&self, conn: &mut PgConnection) -> Result<Claim> {
        if !store::idempotency::try_lock(conn, self.lock_id()).await? {
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

/// The 64-bit advisory lock id of (principal, key).
pub fn lock_id(principal: Uuid, key: &str) -> i64 {
    let digest = Sha256::new().chain_update(principal.as_bytes()).chain_update(key.as_bytes()).finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

fn conflict(message: &'static str) -> Problem {
    Problem::new(ProblemCode::IdempotencyConflict, message)
}

#[cfg(test)]
mod tests {
    use super::*;

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
