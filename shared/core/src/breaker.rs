//! A circuit breaker in front of Redis for the queue's pushes.
//!
//! Every job is a nudge for work PostgreSQL already holds, and the sweeper
//! sends a lost one again: a push may fail without harm, but it must not
//! make a request wait. Once a push fails (an error, or no answer within its
//! timeout), the breaker opens and pushes fail at once, without trying
//! Redis; a background probe pings Redis every [`PROBE_EVERY`] and closes the
//! breaker the moment Redis answers. Open breakers are counted in
//! `svc_queue_breaker_open` ([`crate::faults`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often an open breaker's probe tries Redis, and how long each try waits.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct Breaker {
    open: AtomicBool,
}

impl Breaker {
    /// Whether pushes should fail at once.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Opens the breaker after a failed push, and starts its probe (unless it
    /// was open already: one probe at a time).
    pub fn trip(self: &Arc<Self>, client: &redis::Client) {
        if self.open.swap(true, Ordering::AcqRel) {
            return;
        }
        crate::faults::queue_breaker_opened();
        tracing::warn!(
            "Redis failed a push: pushes fail at once until it answers again (the sweeper sends their jobs)"
        );
        let (breaker, client) = (self.clone(), client.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                if crate::runtime::check_redis(&client).await.is_ok() {
                    breaker.open.store(false, Ordering::Release);
                    crate::faults::queue_breaker_closed();
                    tracing::info!("Redis answers again: pushes resume");
                    return;
                }
            }
        });
    }
}
