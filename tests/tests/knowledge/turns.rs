//! Fair turns across Workspaces with the real binaries: one Workspace's
//! backlog does not queue another's source behind it.

use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use svc_tests::stack::{Worker, flush_namespace};

use super::{REDIS, Stage, add_all, assert_promoted_once, stage, tenant};

/// The sources (their keys) in the order their first attempt started, as
/// PostgreSQL tells a source's change from pending to processing, until
/// `wanted` have started.
async fn start_order(pool: &PgPool, listener: &mut PgListener, wanted: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut started: Vec<String> = Vec::new();
    while started.len() < wanted {
        let left = deadline.saturating_duration_since(Instant::now());
        let notification = tokio::time::timeout(left, listener.recv())
            .await
            .unwrap_or_else(|_| panic!("only {started:?} started"))
            .unwrap();
        let key: String = sqlx::query_scalar("SELECT key FROM knowledge_sources WHERE id = $1::uuid")
            .bind(notification.payload())
            .fetch_one(pool)
            .await
            .unwrap();
        if !started.contains(&key) {
            started.push(key);
        }
    }
    started
}

/// Workspace A queues 12 sources while no worker runs; then Workspace B adds
/// one. A worker with one job slot takes B's second (A's first was the oldest
/// work, and then A has been served and B not), where first-in first-out
/// order took it thirteenth; A's sources start in the order they were added.
#[sqlx::test(migrations = false)]
async fn one_workspaces_backlog_does_not_queue_anothers_source(pool: PgPool) {
    let Stage { database, ns, api, tenant: a } = stage(&pool, REDIS, &[]).await;
    let b = tenant(&api, &database).await;
    add_all(&a, &api, 12).await;
    b.add(&api, 100).await;
    let mut listener = PgListener::connect(&database).await.unwrap();
    listener.listen("knowledge_source_changed").await.unwrap();
    let mut worker = Worker::start(&database, REDIS, &ns, &[("SVC_WORKER_CONCURRENCY", "1")]).await;
    let order = start_order(&pool, &mut listener, 13).await;
    assert_eq!(order[1], "doc-100", "B's source waits for one of A's, not all: {order:?}");
    let a_order: Vec<&String> = order.iter().filter(|key| *key != "doc-100").collect();
    let added: Vec<String> = (0..12).map(|i| format!("doc-{i}")).collect();
    assert_eq!(a_order, added.iter().collect::<Vec<_>>(), "A's sources start in the order they were added");
    let deadline = Instant::now() + Duration::from_secs(60);
    while super::count(&pool, "SELECT count(*) FROM knowledge_revisions WHERE state <> 'active'").await > 0 {
        assert!(Instant::now() < deadline, "{}", worker.process.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_promoted_once(&pool, 13).await;
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}
