//! A few limit-consuming writes per Workspace at a time in this process.
//!
//! Such writes end on their Workspace's usage, which each holds only from its
//! reservation to its commit (see `store::usage`), so several of one Workspace
//! run side by side. Without a gate, a flood of them in one Workspace would
//! each take a pooled connection, until the whole pool was busy with one
//! tenant and every other tenant's requests timed out. At the gate they wait in
//! memory instead: at most `permits` connections per Workspace and process, and
//! the wait is bounded (then `internal_error` 503 with `Retry-After`, nothing
//! written).
//!
//! A write takes one or more of the places: one whose reservation queues on
//! the usage row in PostgreSQL anyway (Agents, API keys) takes more, so fewer
//! of them hold connections only to wait there; one counted on the usage
//! shards (a source's add), where writers mostly do not wait for each other,
//! takes one. Besides, all Workspaces' gated writes together hold at most
//! `total` connections, so however many Workspaces flood at once, the rest of
//! the pool stays for reads and ungated writes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_contract::Problem;
use tokio::sync::OwnedSemaphorePermit;

use crate::ids::WorkspaceId;

type Gate = Arc<tokio::sync::Semaphore>;

pub struct Gates {
    open: Mutex<HashMap<WorkspaceId, Gate>>,
    /// One place per gated write in the process, whatever its Workspace.
    all: Gate,
    wait: Duration,
    permits: usize,
    /// Writes waiting for their places now, in every Workspace.
    waiting: AtomicUsize,
}

/// A turn at a Workspace's gate; the next caller goes when it is dropped.
pub struct Turn<'a> {
    gates: &'a Gates,
    workspace: WorkspaceId,
    guard: Option<OwnedSemaphorePermit>,
    overall: Option<OwnedSemaphorePermit>,
}

impl Gates {
    /// Gates of `permits` places per Workspace (at least one), and `total`
    /// writes inside at once in all (at least one), callers waiting at most
    /// `wait` for the places they ask for.
    pub fn new(wait: Duration, permits: usize, total: usize) -> Self {
        let all = Arc::new(tokio::sync::Semaphore::new(total.max(1)));
        Self { open: Mutex::new(HashMap::new()), all, wait, permits: permits.max(1), waiting: AtomicUsize::new(0) }
    }

    /// Waits for `places` of `workspace`'s places (at least one, at most all):
    /// `busy` after the configured wait.
    pub async fn enter(&self, workspace: WorkspaceId, places: usize) -> Result<Turn<'_>, Problem> {
        let places = u32::try_from(places.clamp(1, self.permits)).unwrap_or(1);
        let gate = match self.open.lock() {
            Ok(mut open) => {
                open.entry(workspace).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.permits))).clone()
            }
            Err(_) => {
                tracing::error!(%workspace, "the gates' lock is poisoned (a panic while it was held)");
                return Err(Problem::internal());
            }
        };
        let mut turn = Turn { gates: self, workspace, guard: None, overall: None };
        // The Workspace's places first, then one of the process's.
        let both = async {
            turn.guard = Some(gate.acquire_many_owned(places).await?);
            turn.overall = Some(self.all.clone().acquire_owned().await?);
            Ok::<_, tokio::sync::AcquireError>(())
        };
        let waited = {
            let _counted = Waiting::start(&self.waiting);
            tokio::time::timeout(self.wait, both).await
        };
        match waited {
            // The semaphores are never closed.
            Ok(Err(_)) => Err(Problem::internal()),
            Ok(Ok(())) => Ok(turn),
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

    /// Writes waiting for their places right now, in every Workspace.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// A write counted among those waiting, for as long as it waits (its wait
/// ends, or it is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn start(waiting: &'a AtomicUsize) -> Self {
        waiting.fetch_add(1, Ordering::Relaxed);
        Self(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.guard = None;
        self.overall = None;
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
        let gates = Gates::new(Duration::from_millis(50), 1, 10);
        let (a, b) = (WorkspaceId::new(), WorkspaceId::new());
        let first = gates.enter(a, 1).await.unwrap();
        // Another Workspace goes at once; the same one waits, then is refused.
        let other = gates.enter(b, 1).await.unwrap();
        let refused = gates.enter(a, 1).await.err().unwrap();
        assert!(refused.unavailable);
        assert_eq!(refused.details.unwrap()["reason"], "busy");
        drop(other);
        drop(first);
        assert_eq!(gates.in_use(), 0, "gates nobody uses are forgotten");
        let again = gates.enter(a, 1).await.unwrap();
        assert_eq!(gates.in_use(), 1);
        drop(again);
    }

    #[tokio::test]
    async fn writes_are_counted_while_they_wait() {
        let gates = Gates::new(Duration::from_secs(30), 1, 10);
        let ws = WorkspaceId::new();
        let inside = gates.enter(ws, 1).await.unwrap();
        assert_eq!(gates.waiting(), 0, "one inside, none waiting");
        let mut second = Box::pin(gates.enter(ws, 1));
        let mut third = Box::pin(gates.enter(ws, 1));
        // Polled once each: both wait.
        assert!(tokio::time::timeout(Duration::ZERO, &mut second).await.is_err());
        assert!(tokio::time::timeout(Duration::ZERO, &mut third).await.is_err());
        assert_eq!(gates.waiting(), 2);
        drop(third);
        assert_eq!(gates.waiting(), 1, "a wait given up is no longer counted");
        drop(inside);
        let second = second.await.expect("its turn");
        assert_eq!(gates.waiting(), 0);
        drop(second);
    }

    #[tokio::test]
    async fn waiters_go_in_turn() {
        let gates = Arc::new(Gates::new(Duration::from_secs(30), 1, 10));
        let ws = WorkspaceId::new();
        let inside = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (gates, inside) = (gates.clone(), inside.clone());
            tasks.spawn(async move {
                let _turn = gates.enter(ws, 1).await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst);
                assert_eq!(now, 0, "two callers inside at once");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
            });
        }
        tasks.join_all().await;
        assert_eq!(gates.in_use(), 0);
    }

    #[tokio::test]
    async fn a_workspace_lets_its_permits_in_at_once() {
        let gates = Gates::new(Duration::from_millis(50), 3, 10);
        let ws = WorkspaceId::new();
        let inside: Vec<_> = [gates.enter(ws, 1).await, gates.enter(ws, 1).await, gates.enter(ws, 1).await]
            .into_iter()
            .map(|turn| turn.expect("three permits"))
            .collect();
        let refused = gates.enter(ws, 1).await.err().expect("the fourth waits, then is refused");
        assert!(refused.unavailable);
        drop(inside);
        assert_eq!(gates.in_use(), 0);
        let _again = gates.enter(ws, 1).await.expect("room again");
    }

    #[tokio::test]
    async fn a_write_taking_two_places_leaves_fewer_for_the_rest() {
        let gates = Gates::new(Duration::from_millis(50), 4, 10);
        let ws = WorkspaceId::new();
        let pairs = [gates.enter(ws, 2).await.expect("two places"), gates.enter(ws, 2).await.expect("two more")];
        assert!(gates.enter(ws, 1).await.err().expect("no place left").unavailable);
        drop(pairs);
        let ones: Vec<_> = futures_util::future::join_all((0..4).map(|_| gates.enter(ws, 1))).await;
        assert!(ones.iter().all(Result::is_ok), "four writes of one place each go in at once");
        assert!(gates.enter(ws, 2).await.is_err());
        drop(ones);
        // More places than the gate has is all of them, never a wait forever.
        let all = gates.enter(ws, 99).await.expect("all four places");
        assert!(gates.enter(ws, 1).await.is_err());
        drop(all);
    }

    #[tokio::test]
    async fn all_workspaces_together_hold_at_most_the_total() {
        let gates = Gates::new(Duration::from_millis(50), 2, 3);
        let (a, b, c) = (WorkspaceId::new(), WorkspaceId::new(), WorkspaceId::new());
        let inside = [gates.enter(a, 1).await, gates.enter(a, 1).await, gates.enter(b, 1).await];
        assert!(inside.iter().all(Result::is_ok), "three of three");
        let refused = gates.enter(c, 1).await.err().expect("a fourth Workspace's write waits, then is refused");
        assert!(refused.unavailable);
        assert_eq!(gates.in_use(), 2, "a refused write leaves no gate behind");
        drop(inside);
        let _in = gates.enter(c, 1).await.expect("room again");
    }
}
