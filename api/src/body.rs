//! Request bodies: size limits, read deadlines, and the budget of large bodies in
//! flight across the process.
//!
//! A body is refused with 413 as soon as it is known to be over its limit (from
//! `Content-Length`, or while it streams), before it is buffered whole. It must
//! arrive by a deadline that grows with its size, so a client that trickles
//! bytes cannot hold a request open for ever (408). A body that may be larger
//! than the default limit first takes its share of a process-wide budget: the
//! memory a large body costs while it is parsed and written. When the budget is
//! spent, the request waits for a share (up to a bound), then gets 503 with
//! `Retry-After`: fifty concurrent 8 MiB uploads queue instead of exhausting
//! memory.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, Limited};
use svc_contract::Problem;
use svc_contract::catalog::DEFAULT_BODY_LIMIT;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget counts in KiB.
const UNIT: u64 = 1024;
/// The slowest upload accepted, after the base deadline: 1 MiB a second.
const MIN_BYTES_PER_SEC: u64 = 1024 * 1024;
/// A large body costs about this many times its size while it is handled (the
/// bytes, the parsed JSON, the copy sent to PostgreSQL).
const COST_FACTOR: u64 = 3;

#[derive(Clone)]
pub struct BodyPolicy {
    /// Base time for a body to arrive; larger bodies get a second per MiB more.
    pub timeout: Duration,
    budget: Arc<Semaphore>,
    budget_units: u64,
    /// Longest wait for a share of the budget.
    pub budget_wait: Duration,
}

/// A share of the large-body budget, held until the request is answered.
pub struct Share(#[expect(dead_code, reason = "held for its Drop")] OwnedSemaphorePermit);

impl BodyPolicy {
    pub fn new(timeout: Duration, budget_bytes: u64, budget_wait: Duration) -> Self {
        let budget_units = (budget_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS as u64);
        Self { timeout, budget: Arc::new(Semaphore::new(budget_units as usize)), budget_units, budget_wait }
    }

    /// The deadline for a body of at most `bytes`.
    pub fn deadline(&self, bytes: u64) -> Duration {
        self.timeout + Duration::from_secs(bytes / MIN_BYTES_PER_SEC)
    }

    /// Takes the share of the budget a body of up to `bytes` needs, when it may
    /// be larger than the default limit; `None` for small bodies.
    pub async fn share(&self, bytes: u64) -> Result<Option<Share>, Problem> {
        if bytes <= DEFAULT_BODY_LIMIT as u64 {
            return Ok(None);
        }
        let units = (bytes.saturating_mul(COST_FACTOR) / UNIT).clamp(1, self.budget_units);
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        match tokio::time::timeout(self.budget_wait, self.budget.clone().acquire_many_owned(units)).await {
            Ok(Ok(permit)) => Ok(Some(Share(permit))),
            _ => {
                tracing::warn!(bytes, "refused a large body: the budget for bodies in flight stayed spent");
                Err(Problem::unavailable()
                    .with_detail("reason", "large_bodies_in_flight")
                    .with_detail("retryable", true))
            }
        }
    }

    /// Reads `body` whole within `limit` bytes and its deadline. `declared` is
    /// the request's `Content-Length`, if any: a body declared over the limit is
    /// refused before a byte is read.
    pub async fn read(&self, body: Body, limit: usize, declared: Option<u64>) -> Result<Bytes, Problem> {
        if declared.is_some_and(|length| length > limit as u64) {
            return Err(Problem::body_too_large(limit));
        }
        let deadline = self.deadline(declared.unwrap_or(limit as u64));
        let collected = tokio::time::timeout(deadline, Limited::new(body, limit).collect()).await;
        match collected {
            Err(_) => Err(Problem::body_timeout()),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(Problem::body_too_large(limit)),
            Ok(Err(_)) => Err(Problem::invalid("unreadable_body", "The request body could not be read.")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn large_bodies_share_a_bounded_budget() {
        let policy = BodyPolicy::new(Duration::from_secs(1), 30 * 1024 * 1024, Duration::from_millis(20));
        assert!(policy.share(1024).await.unwrap().is_none(), "small bodies take no share");
        // Each 8 MiB body costs 24 MiB of a 30 MiB budget: the second must wait.
        let first = policy.share(8 * 1024 * 1024).await.unwrap();
        assert!(first.is_some());
        let refused = policy.share(8 * 1024 * 1024).await.err().unwrap();
        assert_eq!(refused.http_status(), 503);
        drop(first);
        assert!(policy.share(8 * 1024 * 1024).await.unwrap().is_some(), "a share freed is a share taken");
        // A body larger than the whole budget takes all of it rather than never going.
        let policy = BodyPolicy::new(Duration::from_secs(1), 2 * 1024 * 1024, Duration::from_millis(20));
        assert!(policy.share(128 * 1024 * 1024).await.unwrap().is_some());
    }

    #[test]
    fn deadlines_grow_with_size() {
        let policy = BodyPolicy::new(Duration::from_secs(30), 1 << 30, Duration::from_secs(1));
        assert_eq!(policy.deadline(1000), Duration::from_secs(30));
        assert_eq!(policy.deadline(128 * 1024 * 1024), Duration::from_secs(30 + 128));
    }

    #[tokio::test]
    async fn limits_and_declared_lengths() {
        let policy = BodyPolicy::new(Duration::from_secs(5), 1 << 30, Duration::from_secs(1));
        let ok = policy.read(Body::from("12345"), 5, Some(5)).await.unwrap();
        assert_eq!(&ok[..], b"12345");
        let over = policy.read(Body::from("123456"), 5, None).await.err().unwrap();
        assert_eq!(over.http_status(), 413);
        let declared = policy.read(Body::from(""), 5, Some(6)).await.err().unwrap();
        assert_eq!(declared.http_status(), 413);
    }
}
