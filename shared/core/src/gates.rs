//! One limit-consuming write per Workspace at a time in this process.
//!
//! Such writes serialize on their Workspace's usage row anyway. Without a gate,
//! a flood of them in one Workspace would each take a pooled connection and
//! wait on that row lock, until the whole pool waited and every other tenant's
//! requests timed out. At the gate they wait in memory instead: at most one
//! connection per Workspace and process waits on the row, and the wait is
//! bounded (then `internal_error` 503 with `Retry-After`, nothing written).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_contract::Problem;
use tokio::sync::OwnedMutexGuard;

use crate::ids::WorkspaceId;

type Gate = Arc<tokio::sync::Mutex<()>>;

pub struct Gates {
    open: Mutex<HashMap<WorkspaceId, Gate>>,
    wait: Duration,
}

/// A turn at a Workspace's gate; the next caller goes when it is dropped.
pub struct Turn<'a> {
    gates: &'a Gates,
    workspace: WorkspaceId,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Gates {
    /// Gates whose callers wait at most `wait` for their turn.
    pub fn new(wait: Duration) -> Self {
        Self { open: Mutex::new(HashMap::new()), wait }
    }

    /// Waits for `workspace`'s turn: `busy` after the configured wait.
    pub async fn enter(&self, workspace: WorkspaceId) -> Result<Turn<'_>, Problem> {
        let gate = match self.open.lock() {
            Ok(mut open) => open.entry(workspace).or_default().clone(),
            Err(_) => {
                tracing::error!(%workspace, "the gates' lock is poisoned (a panic while it was held)");
                return Err(Problem::internal());
            }
        };
        let mut turn = Turn { gates: self, workspace, guard: None };
        match tokio::time::timeout(self.wait, gate.lock_owned()).await {
            Ok(guard) => {
                turn.guard = Some(guard);
                Ok(turn)
            }
            Err(_) => {
                tracing::warn!(%workspace, wait = ?self.wait, "busy: no turn at the Workspace's gate in time");
                Err(Problem::busy())
            }
        }
    }

    /// Workspaces with a gate in use (someone inside or waiting).
    pub fn in_use(&self) -> usize {
        self.open.lock().map(|open| open.len()).unwrap_or_default()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.guard = None;
        // Forget the gate when nobody else holds or waits for it (the map's is
        // the last reference); anyone arriving meanwhile takes the map lock first.
        if let Ok(mut open) = self.gates.open.lock()
            && open.get(&self.workspace).is_some_and(|gate| Arc::strong_count(gate) == 1)
        {
            open.remove(&self.workspace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_turn_at_a_time_per_workspace_and_bounded_waits() {
        let gates = Gates::new(Duration::from_millis(50));
        let (a, b) = (WorkspaceId::new(), WorkspaceId::new());
        let first = gates.enter(a).await.unwrap();
        // Another Workspace goes at once; the same one waits, then is refused.
        let other = gates.enter(b).await.unwrap();
        let refused = gates.enter(a).await.err().unwrap();
        assert!(refused.unavailable);
        assert_eq!(refused.details.unwrap()["reason"], "busy");
        drop(other);
        drop(first);
        assert_eq!(gates.in_use(), 0, "gates nobody uses are forgotten");
        let again = gates.enter(a).await.unwrap();
        assert_eq!(gates.in_use(), 1);
        drop(again);
    }

    #[tokio::test]
    async fn waiters_go_in_turn() {
        let gates = Arc::new(Gates::new(Duration::from_secs(30)));
        let ws = WorkspaceId::new();
        let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (gates, inside) = (gates.clone(), inside.clone());
            tasks.spawn(async move {
                let _turn = gates.enter(ws).await.unwrap();
                let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                assert_eq!(now, 0, "two callers inside at once");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        tasks.join_all().await;
        assert_eq!(gates.in_use(), 0);
    }
}
