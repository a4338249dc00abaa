//! The worker's one retry policy around a job's work: tried again, backing
//! off, after a failure worth waiting for ([`crate::error::worth_waiting_for`],
//! the meaning an attempt's own steps use). What an attempt gave back
//! uncounted is what a job tries again; a step too slow for its statement
//! timeout counted once and is not tried again here.

use std::fmt::Debug;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::{Error, chain, worth_waiting_for};

/// Tries within one job before giving the work back: the work is in
/// PostgreSQL, and the sweeper sends its job again once nobody holds it.
fn policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(3))
        .with_max_times(4)
}

/// `work` for `what` (a job), under the policy.
pub async fn work<T, Fut>(what: impl Debug, work: impl FnMut() -> Fut) -> Result<T, Error>
where
    Fut: Future<Output = Result<T, Error>>,
{
    work.retry(policy())
        .when(worth_waiting_for)
        .notify(|error, delay| {
            crate::faults::retried(crate::faults::Retry::Work);
            tracing::warn!(?what, error = %chain(error), ?delay, "job failed; retrying");
        })
        .await
}
