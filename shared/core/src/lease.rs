//! A lease renewed in the background while its work runs: a revision's
//! attempt (`knowledge_revisions.lease_until`), the sweeper
//! (`singleton_leases`).
//!
//! A renewal that cannot reach PostgreSQL (a connection cut off without an
//! error answers nothing) is given up after a third of the lease and tried
//! again, so the loop never hangs; the lease then runs out in PostgreSQL by
//! itself and another process takes the work over. Once a renewal finds the
//! lease taken by another holder, [`Renewal::lost`] resolves: the work stops
//! at once rather than finish beside its new holder.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::error::Result;

/// One renewal: `Ok(false)` when the lease is no longer ours.
pub type Renew = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<bool>> + Send>> + Send + Sync>;

/// Renews a lease in the background until stopped or lost.
pub struct Renewal {
    stop: Arc<Notify>,
    /// `true` while no renewal has found the lease taken.
    held: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Renewal {
    /// Renews every third of `length` with `renew`. `what` names the lease in
    /// the log.
    pub fn keep(what: String, length: Duration, renew: Renew) -> Self {
        let stop = Arc::new(Notify::new());
        let (holding, held) = watch::channel(true);
        let stopped = stop.clone();
        let every = length / 3;
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.notified() => return,
                    () = tokio::time::sleep(every) => {}
                }
                match tokio::time::timeout(every, renew()).await {
                    Ok(Ok(true)) => {}
                    Ok(Ok(false)) => {
                        tracing::warn!(lease = %what, "the lease was lost; another holder may have taken over");
                        let _ = holding.send(false);
                        return;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(lease = %what, error = %crate::error::chain(&error), "could not renew a lease")
                    }
                    Err(_) => tracing::warn!(lease = %what, "no answer renewing a lease; trying again"),
                }
            }
        });
        Self { stop, held, task }
    }

    /// Whether no renewal has found the lease taken.
    pub fn held(&self) -> bool {
        *self.held.borrow()
    }

    /// Resolves once a renewal finds the lease taken by another holder.
    pub async fn lost(&self) {
        let mut held = self.held.clone();
        if held.wait_for(|held| !held).await.is_err() {
            // The renewal stopped without losing the lease: never.
            std::future::pending::<()>().await;
        }
    }

    /// Stops renewing (the lease itself is the caller's to release).
    pub async fn stop(mut self) {
        self.stop.notify_one();
        if let Err(error) = (&mut self.task).await {
            tracing::error!(%error, "a lease renewal task failed");
        }
    }
}

/// Work that panicked or was dropped mid-way stops renewing its lease: the
/// lease runs out and another holder can start. A detached renewal would
/// hold it for as long as the process lives.
impl Drop for Renewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_renewal_that_hangs_is_tried_again_and_a_taken_lease_ends_the_work() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        // The first renewal never answers (a connection cut off), the second
        // succeeds, the third finds the lease taken.
        let renew: Renew = Arc::new(move || {
            let call = counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                match call {
                    0 => std::future::pending().await,
                    1 => Ok(true),
                    _ => Ok(false),
                }
            })
        });
        let renewal = Renewal::keep("test".into(), Duration::from_millis(30), renew);
        assert!(renewal.held());
        renewal.lost().await;
        assert!(!renewal.held());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        renewal.stop().await;
    }
}
