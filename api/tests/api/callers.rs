//! The callers each API process keeps (`svc_core::auth::callers`): whatever
//! revokes a caller out of band stops it within a second, and a lost listener
//! turns the cache off.
//!
//! The cache here keeps a caller for a minute, so only PostgreSQL's
//! notifications (or this process's own writes) can end one sooner: each test
//! fails if they do not.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use svc_tests::http::TestResponse;

use crate::helpers::{TestApp, assert_ok, assert_problem, config};

/// The longest a revoked caller may still be served.
const WITHIN: Duration = Duration::from_secs(1);

async fn app(pool: PgPool) -> TestApp {
    let config =
        svc_api::config::ServeConfig { caller_cache_entries: 1_000, caller_cache_max_age_ms: 60_000, ..config() };
    let app = TestApp::with_config(pool, config).await;
    until(Duration::from_secs(10), "the cache listens", || async {
        app.metric("svc_caller_cache_listening").await == 1.0
    })
    .await;
    app
}

/// Polls `done` until it holds, failing after `deadline`.
async fn until<F, Fut>(deadline: Duration, what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < deadline, "{what}: not within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Calls `call` until it answers `status`, which must happen within [`WITHIN`]
/// of `since`; returns that answer.
async fn refused_within<F, Fut>(since: Instant, status: u16, call: F) -> TestResponse
where
    F: Fn() -> Fut,
    Fut: Future<Output = TestResponse>,
{
    loop {
        let response = call().await;
        if response.status == status {
            return response;
        }
        assert_eq!(response.status, 200, "{}", response.text());
        assert!(since.elapsed() < WITHIN, "still served {:?} after the change", since.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn hits(app: &TestApp) -> f64 {
    app.metric("svc_caller_cache_lookups_total{result=\"hit\"}").await
}

/// Revokes a key in PostgreSQL directly, as another process would.
async fn revoke_out_of_band(app: &TestApp, key_id: &str) {
    let id = svc_core::ids::ApiKeyId::parse(key_id).unwrap().0;
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1").bind(id).execute(&app.pool).await.unwrap();
}

async fn execute(app: &TestApp, sql: &'static str, bind: &str) {
    sqlx::query(sql).bind(bind).execute(&app.pool).await.unwrap();
}

#[sqlx::test(migrations = "../migrations")]
async fn a_revoked_key_stops_working_within_a_second(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let agent = app.agent(&owner, &ws, "Support").await;
    let (key_id, secret) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let inspect = || app.op("agents/inspect", &secret, None, json!({ "agentId": agent }));
    assert_ok("agents/inspect", &inspect().await);
    let before = hits(&app).await;
    assert_ok("agents/inspect", &inspect().await);
    let tool = app.tool(&secret, None, "svc_agent_inspect", json!({ "agentId": agent })).await;
    assert_eq!(tool.json()["result"]["isError"], json!(false), "{}", tool.text());
    assert_eq!(hits(&app).await, before + 2.0, "the key's caller is kept, for HTTP and MCP alike");

    let revoked = Instant::now();
    revoke_out_of_band(&app, &key_id).await;
    let refused = refused_within(revoked, 401, inspect).await;
    assert_problem(&refused, 401, "authentication_required");
    let tool = app.tool(&secret, None, "svc_agent_inspect", json!({ "agentId": agent })).await;
    assert_problem(&tool, 401, "authentication_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn revoked_user_sessions_stop_within_a_second(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let agent = app.agent(&owner, &ws, "Support").await;
    let inspect = || app.op("agents/inspect", &owner.token, Some(&ws), json!({ "agentId": agent }));
    assert_ok("agents/inspect", &inspect().await);
    assert_ok("agents/inspect", &inspect().await);

    let revoked = Instant::now();
    // Tokens issued in the same second as the revocation are void too.
    execute(&app, "UPDATE users SET sessions_revoked_at = now() + interval '1 second' WHERE subject = $1", "olga")
        .await;
    let refused = refused_within(revoked, 401, inspect).await;
    assert_problem(&refused, 401, "reauthentication_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_removed_member_loses_the_workspace_within_a_second(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let agent = app.agent(&owner, &ws, "Support").await;
    let mia = app.user("mia").await;
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "mia", "member").await.unwrap();
    let inspect = || app.op("agents/inspect", &mia.token, Some(&ws), json!({ "agentId": agent }));
    assert_ok("agents/inspect", &inspect().await);
    assert_ok("agents/inspect", &inspect().await);

    let removed = Instant::now();
    execute(&app, "DELETE FROM memberships WHERE user_id = (SELECT id FROM users WHERE subject = $1)", "mia").await;
    let refused = refused_within(removed, 400, inspect).await;
    assert_problem(&refused, 400, "workspace_selection_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn an_archived_workspace_shows_within_a_second(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let (_, secret) = app.api_key(&owner, &ws, json!({ "preset": "operator" })).await;
    let status = || async {
        let response = app.op("identity/status", &secret, None, json!({})).await;
        assert_ok("identity/status", &response)["workspace"]["status"].clone()
    };
    assert_eq!(status().await, json!("active"));
    assert_eq!(status().await, json!("active"));

    let archived = Instant::now();
    svc_core::admin::set_archived(&app.pool, &ws, true).await.unwrap();
    until(WITHIN, "identity.status shows the Workspace archived", || async { status().await == json!("archived") })
        .await;
    assert!(archived.elapsed() < WITHIN);
    let create = app.op("agents/create", &secret, None, json!({ "name": "Late" })).await;
    assert_problem(&create, 409, "workspace_archived");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_key_revoked_here_is_refused_at_once(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let (key_id, secret) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    assert_ok("identity/status", &app.op("identity/status", &secret, None, json!({})).await);
    let revoke = json!({ "apiKeyId": key_id, "confirm": true });
    assert_ok("api-keys/revoke", &app.op("api-keys/revoke", &owner.token, Some(&ws), revoke).await);
    // No waiting for PostgreSQL's notification: this process forgot at once.
    assert_problem(&app.op("identity/status", &secret, None, json!({})).await, 401, "authentication_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_lost_listener_turns_the_cache_off(pool: PgPool) {
    let app = app(pool).await;
    let (owner, ws) = app.owner("olga").await;
    let (key_id, secret) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let status = || app.op("identity/status", &secret, None, json!({}));
    assert_ok("identity/status", &status().await);

    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    until(Duration::from_secs(10), "the cache stops listening", || async {
        app.metric("svc_caller_cache_listening").await == 0.0
    })
    .await;
    // Deaf: a change now goes unheard, so nothing kept may answer.
    revoke_out_of_band(&app, &key_id).await;
    assert_problem(&status().await, 401, "authentication_required");
    until(Duration::from_secs(10), "the cache listens again", || async {
        app.metric("svc_caller_cache_listening").await == 1.0
    })
    .await;
}

#[sqlx::test(migrations = "../migrations")]
async fn each_key_gets_its_own_workspace(pool: PgPool) {
    let app = app(pool).await;
    let mut keys: Vec<(String, String)> = Vec::new();
    for subject in ["olga", "omar"] {
        let (owner, ws) = app.owner(subject).await;
        let (_, secret) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
        keys.push((ws, secret));
    }
    for _ in 0..3 {
        for (ws, secret) in &keys {
            let data: Value = assert_ok("identity/status", &app.op("identity/status", secret, None, json!({})).await);
            assert_eq!(data["workspace"]["id"], json!(ws));
        }
    }
}

/// The listener cut off without a word (a partition: its socket open, nothing
/// arriving, no error): it hears no heartbeat, counts itself deaf within a few
/// seconds (nothing kept answers meanwhile), and listens again once the
/// network returns. Its connection goes through a proxy the test black-holes.
#[sqlx::test(migrations = "../migrations")]
async fn a_listener_cut_off_without_a_word_goes_deaf_and_listens_again(pool: PgPool) {
    let o = pool.connect_options();
    let proxy = svc_tests::proxy::Proxy::start(format!("{}:{}", o.get_host(), o.get_port()).parse().unwrap()).await;
    let url = format!("postgres://{}@127.0.0.1:{}/{}", o.get_username(), proxy.port, o.get_database().unwrap());
    let proxied =
        svc_core::runtime::connect(&url, "svc-api-partition", 4, svc_core::runtime::Timeouts::SERVING).unwrap();
    let app = app(proxied).await;
    proxy.black_hole();
    until(Duration::from_secs(30), "the cache finds itself deaf", || async {
        app.metric("svc_caller_cache_listening").await == 0.0
    })
    .await;
    proxy.restore();
    until(Duration::from_secs(30), "the cache listens again", || async {
        app.metric("svc_caller_cache_listening").await == 1.0
    })
    .await;
}
