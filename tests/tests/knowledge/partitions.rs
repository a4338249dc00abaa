//! Partitions with the real binaries: one worker replica reaches PostgreSQL
//! through a proxy the test black-holes (nothing passes either way, every
//! socket stays open: a failed switch, a lost host), at three moments: while
//! it sweeps, in the middle of an attempt (its promotion sent, not
//! committed), and in the middle of a reconcile apply. Another replica, on a
//! working network, must take its revisions over and sweep within the
//! contract's 30 seconds, and apply every entry exactly once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::proxy::Proxy;
use svc_tests::stack::{Worker, flush_namespace};

use super::{REDIS, Stage, Tenant, assert_promoted_once, content, stage};

/// The contract's bound on taking over work a replica held (contract §9).
const TAKEOVER: Duration = Duration::from_secs(30);

/// A worker whose every PostgreSQL connection goes through `Proxy`.
async fn proxied_worker(pool: &PgPool, ns: &str) -> (Proxy, Worker) {
    let o = pool.connect_options();
    let proxy = Proxy::start(format!("{}:{}", o.get_host(), o.get_port()).parse().unwrap()).await;
    let url = format!("postgres://{}@127.0.0.1:{}/{}", o.get_username(), proxy.port, o.get_database().unwrap());
    // A short grace: its jobs hang in the black hole, and the test ends it.
    let worker = Worker::start(&url, REDIS, ns, &[("SVC_WORKER_SHUTDOWN_GRACE_SECS", "1")]).await;
    (proxy, worker)
}

async fn scalar<T>(pool: &PgPool, sql: &'static str) -> T
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// The sweeper's lease holder while its lease is live.
async fn sweeping(pool: &PgPool) -> Option<String> {
    scalar(pool, "SELECT max(holder) FROM singleton_leases WHERE name = 'sweeper' AND expires_at > clock_timestamp()")
        .await
}

/// Revisions some attempt holds under a live lease.
async fn held(pool: &PgPool) -> i64 {
    scalar(pool, "SELECT count(*) FROM knowledge_revisions WHERE state = 'processing' AND lease_until > now()").await
}

/// Waits (polling PostgreSQL) until `done` holds, at most `within`.
async fn until<F, Fut>(within: Duration, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl Tenant {
    async fn add_many(&self, api: &svc_tests::stack::Api, n: usize) -> Vec<String> {
        let mut sources = Vec::with_capacity(n);
        for i in 0..n {
            let mut input = self.submission(i, "v1", content(i).repeat(120));
            input["key"] = json!(format!("part-{i}"));
            let (status, body) = api.op("knowledge-sources/add", &self.token, Some(&self.workspace), &input).await;
            assert_eq!(status, 200, "{body}");
            sources.push(body["data"]["knowledgeSource"]["id"].as_str().unwrap().to_owned());
        }
        sources
    }
}

/// Cut right after the replica starts a sweep, while it holds revisions: its
/// sweeper lease runs out and the other replica sweeps (re-sending the held
/// revisions once their leases ran out) and finishes everything.
#[sqlx::test(migrations = false)]
async fn a_replica_cut_off_while_sweeping_stops_no_sweep(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let (proxy, mut cut_off) = proxied_worker(&pool, &ns).await;
    let sources = tenant.add_many(&api, 32).await;
    // Caught in the act: it holds revisions and its sweeper lease at once.
    let holder = loop {
        if held(&pool).await > 0
            && let Some(holder) = sweeping(&pool).await
        {
            proxy.black_hole();
            // Nothing it sends arrives now: is its sweep still under way?
            if sweeping(&pool).await.as_deref() == Some(holder.as_str()) {
                break holder;
            }
            proxy.restore();
        }
        let active: i64 = scalar(&pool, "SELECT count(*) FROM knowledge_revisions WHERE state = 'active'").await;
        assert!(active < 32, "never caught it sweeping while it held revisions");
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let cut = Instant::now();
    let mut other = Worker::start(&database, REDIS, &ns, &[]).await;
    until(TAKEOVER, "another replica sweeps", || async { sweeping(&pool).await.is_some_and(|now| now != holder) })
        .await;
    let states = tenant.wait_all(&api, &sources, TAKEOVER.saturating_sub(cut.elapsed())).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}\n{}", other.process.logs());
    assert_promoted_once(&pool, 32).await;
    eprintln!("taken over and finished {:?} after the cut", cut.elapsed());
    assert!(other.process.terminate().await.success(), "{}", other.process.logs());
    assert!(cut_off.process.terminate().await.success(), "a cut-off replica stops on SIGTERM too");
    flush_namespace(REDIS, &ns).await;
}

/// Cut in the middle of an attempt: its promotion's statement sent, its
/// COMMIT never. PostgreSQL ends the open transaction, the lease runs out,
/// and the other replica promotes the revision, once.
#[sqlx::test(migrations = false)]
async fn a_replica_cut_off_mid_attempt_loses_nothing_and_applies_nothing_twice(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let (proxy, mut cut_off) = proxied_worker(&pool, &ns).await;
    // The promotion's statement, the first time a connection prepares it.
    proxy.black_hole_on(b"AS previous");
    let sources = tenant.add_many(&api, 8).await;
    until(TAKEOVER, "the replica promotes (and is cut off)", || async { proxy.is_black_holed() }).await;
    let cut = Instant::now();
    let mut other = Worker::start(&database, REDIS, &ns, &[]).await;
    let states = tenant.wait_all(&api, &sources, TAKEOVER).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}\n{}", other.process.logs());
    assert!(cut.elapsed() < TAKEOVER, "taken over after {:?}", cut.elapsed());
    assert_promoted_once(&pool, 8).await;
    until(TAKEOVER, "another replica sweeps", || async { sweeping(&pool).await.is_some() }).await;
    assert!(other.process.terminate().await.success(), "{}", other.process.logs());
    assert!(cut_off.process.terminate().await.success(), "a cut-off replica stops on SIGTERM too");
    flush_namespace(REDIS, &ns).await;
}

/// Cut in the middle of a reconcile apply (an entry's checkpoint sent, its
/// COMMIT never): the other replica applies the run to its end, every entry
/// exactly once.
#[sqlx::test(migrations = false)]
async fn a_replica_cut_off_mid_reconcile_leaves_the_run_to_another(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let entries: Vec<Value> = (0..40)
        .map(|i| {
            let text = format!("{}\n\nEntry {i}.", content(i));
            json!({ "key": format!("kb-{i}"), "title": format!("KB {i}"),
                    "provenance": { "kind": "repository", "uri": format!("kb/{i}.md") }, "revision": "v1",
                    "digest": svc_contract::digest::sha256_prefixed(text.as_bytes()), "content": text })
        })
        .collect();
    let request = json!({ "agentId": tenant.agent, "manifest": { "version": 1, "sources": entries },
                          "dryRun": false, "idempotencyKey": "partition-0001" });
    let (proxy, mut cut_off) = proxied_worker(&pool, &ns).await;
    // An entry's checkpoint, the first time a connection prepares it.
    proxy.black_hole_on(b"SET checkpoint = checkpoint + 1");
    let (status, body) = api.op("knowledge-sources/reconcile", &tenant.token, Some(&tenant.workspace), &request).await;
    assert_eq!(status, 200, "{body}");
    until(TAKEOVER, "the replica applies (and is cut off)", || async { proxy.is_black_holed() }).await;
    let cut = Instant::now();
    let mut other = Worker::start(&database, REDIS, &ns, &[]).await;
    until(TAKEOVER, "the run completes", || async {
        scalar::<String>(&pool, "SELECT status::text FROM reconcile_runs").await == "completed"
    })
    .await;
    eprintln!("completed {:?} after the cut", cut.elapsed());
    let count = |sql| scalar::<i64>(&pool, sql);
    assert_eq!(count("SELECT checkpoint::bigint FROM reconcile_runs").await, 40);
    assert_eq!(count("SELECT count(*) FROM knowledge_sources").await, 40);
    assert_eq!(count("SELECT count(*) FROM knowledge_revisions").await, 40, "each entry applied once");
    assert_eq!(count("SELECT count(*) FROM reconcile_entries WHERE applied_action = 'add'").await, 40);
    assert!(other.process.terminate().await.success(), "{}", other.process.logs());
    assert!(cut_off.process.terminate().await.success(), "a cut-off replica stops on SIGTERM too");
    flush_namespace(REDIS, &ns).await;
}
