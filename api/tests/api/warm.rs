//! Connections kept warm between requests (`svc_core::runtime::warm`): what
//! is handed out again, what goes back to the pool, and which requests keep
//! theirs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use svc_core::runtime::warm::{Warm, Warmed};

use crate::helpers::{Tenant, assert_ok, assert_problem, config};

const LONG: Duration = Duration::from_secs(3_600);

/// A pool of its own over the test's database, which a test may close.
async fn own_pool(pool: &PgPool, max: u32) -> PgPool {
    PgPoolOptions::new().max_connections(max).connect_with((*pool.connect_options()).clone()).await.unwrap()
}

async fn backend(conn: &mut sqlx::PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(conn).await.unwrap()
}

async fn until(deadline: Duration, what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < deadline, "{what}: not within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_kept_connection_is_the_next_one_handed_out(pool: PgPool) {
    let warm = Warm::with_capacity(pool.clone(), 2, LONG);
    let mut first = warm.acquire().await.unwrap();
    let mut second = warm.acquire().await.unwrap();
    let (first_pid, second_pid) = (backend(&mut first).await, backend(&mut second).await);
    warm.keep(first);
    warm.keep(second);
    assert_eq!(warm.kept(), 2);
    // The most recently kept first.
    assert_eq!(backend(&mut warm.acquire().await.unwrap()).await, second_pid);
    assert_eq!(backend(&mut warm.acquire().await.unwrap()).await, first_pid);
    assert_eq!(warm.kept(), 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn no_more_than_its_capacity_is_kept(pool: PgPool) {
    let pool = own_pool(&pool, 3).await;
    let warm = Warm::with_capacity(pool.clone(), 1, LONG);
    let (a, b) = (warm.acquire().await.unwrap(), warm.acquire().await.unwrap());
    warm.keep(a);
    warm.keep(b);
    assert_eq!(warm.kept(), 1);
    // The other went back to the pool, for anyone to take.
    until(Duration::from_secs(10), "the connection not kept is idle in the pool", || pool.num_idle() == 1).await;
    let none = Warm::with_capacity(pool.clone(), 0, LONG);
    none.keep(Warmed::new(pool.acquire().await.unwrap()));
    assert_eq!(none.kept(), 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_connection_kept_past_its_time_goes_back_to_the_pool(pool: PgPool) {
    let pool = own_pool(&pool, 2).await;
    let warm = Warm::with_capacity(pool.clone(), 2, Duration::from_millis(20));
    let mut conn = warm.acquire().await.unwrap();
    let pid = backend(&mut conn).await;
    warm.keep(conn);
    assert_eq!(warm.kept(), 1);
    // Handed back without anyone asking, and idle in the pool.
    until(Duration::from_secs(10), "the stale connection is back in the pool", || {
        warm.kept() == 0 && pool.num_idle() == 1
    })
    .await;
    assert_eq!(backend(&mut pool.acquire().await.unwrap()).await, pid);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_connection_goes_back_to_sqlx_once_it_is_no_longer_fresh_however_often_it_was_kept(pool: PgPool) {
    // Counts what sqlx hands out: an idle connection through its check
    // before it is handed out, a new one through its set-up.
    let checked = Arc::new(AtomicUsize::new(0));
    let (idle, new) = (checked.clone(), checked.clone());
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .before_acquire(move |_, _| {
            idle.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(true) })
        })
        .after_connect(move |_, _| {
            new.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        })
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    // Fresh for 2 s from when it came from sqlx (between `before` and
    // `after`). Freshness is the clock's: the test waits for the instants
    // that tell the two rules apart, and checks it got there in time.
    let fresh = Duration::from_secs(2);
    let warm = Warm::with_capacity(pool.clone(), 2, fresh);
    let before = Instant::now();
    let conn = warm.acquire().await.unwrap();
    let after = Instant::now();
    warm.keep(conn);
    let from_sqlx = checked.load(Ordering::SeqCst);
    // Halfway: still fresh, handed out again, and kept again by the next
    // request.
    tokio::time::sleep_until((before + fresh / 2).into()).await;
    let mut conn = warm.acquire().await.unwrap();
    assert!(after.elapsed() < fresh, "handed out again within its freshness");
    assert_eq!(checked.load(Ordering::SeqCst), from_sqlx, "a fresh connection is handed out from Warm");
    backend(&mut conn).await;
    let kept_again = Instant::now();
    warm.keep(conn);
    // Past its freshness from sqlx, though kept again less than that ago: it
    // goes back, and the next one comes from sqlx.
    tokio::time::sleep_until((after + fresh).into()).await;
    let mut conn = warm.acquire().await.unwrap();
    backend(&mut conn).await;
    assert!(kept_again.elapsed() < fresh, "fresh still, counted from when it was kept again");
    assert_eq!(warm.kept(), 0);
    assert_eq!(checked.load(Ordering::SeqCst), from_sqlx + 1, "the stale connection went through sqlx");
}

#[sqlx::test(migrations = "../migrations")]
async fn nothing_is_kept_while_the_pool_is_out_of_connections_or_once_stale(pool: PgPool) {
    let pool = own_pool(&pool, 2).await;
    let warm = Warm::with_capacity(pool.clone(), 2, LONG);
    let (a, b) = (warm.acquire().await.unwrap(), warm.acquire().await.unwrap());
    // Both are out: someone may be waiting for one.
    warm.keep(a);
    assert_eq!(warm.kept(), 0);
    drop(b);
    until(Duration::from_secs(10), "both are idle in the pool", || pool.num_idle() == 2).await;
    // A connection that is no longer fresh goes back.
    let never_fresh = Warm::with_capacity(pool.clone(), 2, Duration::ZERO);
    never_fresh.keep(never_fresh.acquire().await.unwrap());
    assert_eq!(never_fresh.kept(), 0);
    // With one of two idle, one is kept.
    until(Duration::from_secs(10), "both are idle again", || pool.num_idle() == 2).await;
    warm.keep(warm.acquire().await.unwrap());
    assert_eq!(warm.kept(), 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_closed_pool_gets_its_kept_connections_back(pool: PgPool) {
    // Three: with two out of two, none would be kept.
    let pool = own_pool(&pool, 3).await;
    let warm = Warm::with_capacity(pool.clone(), 2, LONG);
    let (kept, in_use) = (warm.acquire().await.unwrap(), warm.acquire().await.unwrap());
    warm.keep(kept);
    // Fresh for an hour, and the hand-back task's first look is an hour away:
    // only the closing can hand it back.
    assert_eq!(warm.kept(), 1);
    // close() waits for every connection: it ends only once the kept one is
    // handed back and the one in use is not kept after the pool closed.
    let closing = tokio::spawn({
        let pool = pool.clone();
        async move { pool.close().await }
    });
    until(Duration::from_secs(10), "the pool is closed", || pool.is_closed()).await;
    warm.keep(in_use);
    tokio::time::timeout(Duration::from_secs(10), closing).await.expect("the pool closes").unwrap();
    assert_eq!(warm.kept(), 0);
}

/// An API whose requests keep their connection for as long as it may (a
/// second from when it came from sqlx).
async fn tenant(pool: PgPool) -> Tenant {
    let config = svc_api::config::ServeConfig { db_warm_ms: 1_000, ..config() };
    Tenant::with_config(pool, config).await
}

async fn warm_connections(t: &Tenant) -> f64 {
    t.app.metric("svc_db_connections{state=\"warm\"}").await
}

/// Calls `path` until its connection is kept afterwards: the first call may
/// take a connection kept during the set-up, no longer fresh, which goes
/// back to sqlx; the next comes fresh from sqlx.
async fn until_kept(t: &Tenant, path: &str, input: &serde_json::Value) {
    for _ in 0..3 {
        assert_ok(path, &t.call(path, input.clone()).await);
        if warm_connections(t).await == 1.0 {
            return;
        }
    }
    panic!("{path}: its connection was never kept");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_request_that_succeeded_leaves_its_connection_warm_and_one_that_failed_does_not(pool: PgPool) {
    let t = tenant(pool).await;
    until_kept(&t, "agents/inspect", &json!({ "agentId": t.agent })).await;
    // A failure takes the kept connection and does not keep it.
    let missing = json!({ "agentId": "agt_00000000000000000000000000" });
    assert_problem(&t.call("agents/inspect", missing).await, 404, "resource_not_found");
    assert_eq!(warm_connections(&t).await, 0.0, "a failed call's connection goes back to sqlx");
    // A committed write keeps its connection.
    until_kept(&t, "agents/configure", &json!({ "agentId": t.agent, "name": "Renamed" })).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn a_kept_connection_whose_backend_was_terminated_is_replaced_by_the_next_request(pool: PgPool) {
    let t = tenant(pool).await;
    let inspect = json!({ "agentId": t.agent });
    until_kept(&t, "agents/inspect", &inspect).await;
    terminate_others(&t.app.pool).await;
    let retries = async || t.app.metric("svc_db_retries_total{path=\"request\"}").await;
    let before = retries().await;
    // The kept connection is dead: the request finds out and runs again on a
    // live one (which it keeps).
    assert_ok("agents/inspect", &t.call("agents/inspect", inspect).await);
    assert_eq!(retries().await, before + 1.0, "the dead kept connection was used, and the step retried");
    terminate_others(&t.app.pool).await;
    assert_ok("agents/configure", &t.call("agents/configure", json!({ "agentId": t.agent, "name": "After" })).await);
    assert_eq!(retries().await, before + 2.0);
}

/// Terminates every session of this database but the caller's own.
async fn terminate_others(pool: &PgPool) {
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(pool)
    .await
    .unwrap();
}
