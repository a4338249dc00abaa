//! One idempotency mechanism for every mutation (contract §7).

use serde_json::json;
use sqlx::PgPool;
use svc_core::ids::UserId;

use crate::helpers::{TestApp, TestUser, assert_ok, assert_problem};

const KEY: &str = "retry-key-0001";

async fn user_uuid(app: &TestApp, user: &TestUser) -> uuid::Uuid {
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, None, json!({})).await);
    UserId::parse(data["user"]["id"].as_str().unwrap()).unwrap().0
}

#[sqlx::test(migrations = "../migrations")]
async fn a_repeated_key_replays_the_first_result(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let input = json!({ "name": "Helper", "idempotencyKey": KEY });
    let first = app.op("agents/create", &owner.token, None, input.clone()).await;
    let second = app.op("agents/create", &owner.token, None, input).await;
    let (a, b) = (assert_ok("agents/create", &first), assert_ok("agents/create", &second));
    assert_eq!(a, b);
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    assert_ne!(first.json()["meta"]["requestId"], second.json()["meta"]["requestId"], "a fresh request id");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
    // Key order in the input does not matter.
    let reordered =
        app.op("agents/create", &owner.token, None, json!({ "idempotencyKey": KEY, "name": "Helper" })).await;
    assert_eq!(assert_ok("agents/create", &reordered), a);
}

/// `Idempotency-Key`, as Stripe-style clients send it, is the body's key.
#[sqlx::test(migrations = "../migrations")]
async fn the_idempotency_key_header_is_the_body_key(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let auth = format!("Bearer {}", owner.token);
    let create = |key: &'static str, body: serde_json::Value| {
        let auth = auth.clone();
        let ws = ws.clone();
        let app = &app;
        async move {
            let headers = [
                ("authorization", auth.as_str()),
                ("svc-workspace", ws.as_str()),
                ("content-type", "application/json"),
                ("idempotency-key", key),
            ];
            app.post_raw("agents/create", &headers, body.to_string()).await
        }
    };
    let first = create(KEY, json!({ "name": "Helper" })).await;
    let retried = create(KEY, json!({ "name": "Helper" })).await;
    assert_eq!(assert_ok("agents/create", &first), assert_ok("agents/create", &retried));
    assert_eq!(retried.header("idempotent-replayed"), Some("true"));
    // The header and the same key in the body are one key.
    let both = create(KEY, json!({ "name": "Helper", "idempotencyKey": KEY })).await;
    assert_eq!(both.header("idempotent-replayed"), Some("true"));
    // And the body's key alone replays a call made with the header.
    let body_only =
        app.op("agents/create", &owner.token, Some(&ws), json!({ "name": "Helper", "idempotencyKey": KEY }));
    assert_eq!(body_only.await.header("idempotent-replayed"), Some("true"));
    // Disagreeing: refused, nothing written.
    let disagree = create(KEY, json!({ "name": "Other", "idempotencyKey": "another-key-0001" })).await;
    let body = assert_problem(&disagree, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "idempotency_key_mismatch");
    // A header key is checked like a body key.
    let body = assert_problem(&create("no", json!({ "name": "Other" })).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/idempotencyKey", "{body}");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
    // A read takes no key and ignores the header.
    let headers =
        [("authorization", auth.as_str()), ("svc-workspace", ws.as_str()), ("idempotency-key", "whatever-0001")];
    assert_ok("agents/list", &app.post_raw("agents/list", &headers, "{}").await);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_key_reused_for_another_call_is_a_conflict(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    assert_ok(
        "agents/create",
        &app.op("agents/create", &owner.token, None, json!({ "name": "A", "idempotencyKey": KEY })).await,
    );
    for (path, input) in [
        ("agents/create", json!({ "name": "B", "idempotencyKey": KEY })),
        ("workspaces/create", json!({ "name": "A", "idempotencyKey": KEY })),
        ("workspaces/rename", json!({ "name": "A", "idempotencyKey": KEY })),
    ] {
        let body = assert_problem(&app.op(path, &owner.token, Some(&ws), input).await, 409, "idempotency_conflict");
        assert_eq!(body["error"]["details"]["reason"], "key_reused", "{path}");
    }
    // The same input aimed at another Workspace is another call.
    let second_ws = app.workspace(&owner, "Second").await;
    let body = assert_problem(
        &app.op("agents/create", &owner.token, Some(&second_ws), json!({ "name": "A", "idempotencyKey": KEY })).await,
        409,
        "idempotency_conflict",
    );
    assert_eq!(body["error"]["details"]["reason"], "key_reused");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn keys_belong_to_their_principal(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let a = assert_ok(
        "workspaces/create",
        &app.as_user(&alice, "workspaces/create", json!({ "name": "A", "idempotencyKey": KEY })).await,
    );
    let b = assert_ok(
        "workspaces/create",
        &app.as_user(&bob, "workspaces/create", json!({ "name": "A", "idempotencyKey": KEY })).await,
    );
    assert_ne!(a["workspace"]["id"], b["workspace"]["id"]);
    assert_eq!(b["workspace"]["role"], "owner");
}

#[sqlx::test(migrations = "../migrations")]
async fn twenty_concurrent_identical_requests_make_one_workspace(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let responses = app
        .concurrently(20, |app, _| {
            let token = user.token.clone();
            async move { app.op("workspaces/create", &token, None, json!({ "name": "Once", "idempotencyKey": KEY })).await }
        })
        .await;
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM memberships").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM workspaces WHERE plan = 'trial'").await, 1);
    let mut ids = std::collections::HashSet::new();
    let mut successes = 0;
    for response in &responses {
        if response.status == 200 {
            successes += 1;
            ids.insert(assert_ok("workspaces/create", response)["workspace"]["id"].as_str().unwrap().to_owned());
        } else {
            let body = assert_problem(response, 409, "idempotency_conflict");
            assert_eq!(body["error"]["details"]["reason"], "in_progress");
        }
    }
    assert!(successes >= 1);
    assert_eq!(ids.len(), 1, "every success is the same Workspace");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_request_still_running_holds_its_key(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let principal = user_uuid(&app, &owner).await;
    // Another request with this key is mid-transaction.
    let mut running = app.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(svc_core::idempotency::lock_id(principal, KEY))
        .execute(&mut *running)
        .await
        .unwrap();
    let body = assert_problem(
        &app.op("agents/create", &owner.token, None, json!({ "name": "A", "idempotencyKey": KEY })).await,
        409,
        "idempotency_conflict",
    );
    assert_eq!(body["error"]["details"]["reason"], "in_progress");
    running.rollback().await.unwrap();
    assert_ok(
        "agents/create",
        &app.op("agents/create", &owner.token, None, json!({ "name": "A", "idempotencyKey": KEY })).await,
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn failures_are_not_stored(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "trial", &["agents=0".to_owned()]).await.unwrap();
    let input = json!({ "name": "A", "idempotencyKey": KEY });
    assert_problem(&app.op("agents/create", &owner.token, None, input.clone()).await, 403, "limit_exceeded");
    assert_eq!(app.count("SELECT count(*) FROM idempotency_records").await, 0);
    svc_core::admin::plan_set(&app.pool, &ws, "trial", &[]).await.unwrap();
    let retried = app.op("agents/create", &owner.token, None, input).await;
    assert_ok("agents/create", &retried);
    assert_eq!(retried.header("idempotent-replayed"), None, "executed, not replayed");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn records_expire_after_a_day(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let input = json!({ "name": "A", "idempotencyKey": KEY });
    assert_ok("agents/create", &app.op("agents/create", &owner.token, None, input.clone()).await);
    sqlx::query("UPDATE idempotency_records SET created_at = now() - interval '23 hours'")
        .execute(&app.pool)
        .await
        .unwrap();
    let replay = app.op("agents/create", &owner.token, None, input.clone()).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"), "still within 24 hours");
    sqlx::query("UPDATE idempotency_records SET created_at = now() - interval '24 hours 1 second'")
        .execute(&app.pool)
        .await
        .unwrap();
    let again = app.op("agents/create", &owner.token, None, input).await;
    assert_ok("agents/create", &again);
    assert_eq!(again.header("idempotent-replayed"), None, "expired: executed again");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 2);
    // The worker's sweep deletes what has expired.
    sqlx::query("UPDATE idempotency_records SET created_at = now() - interval '25 hours'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(svc_core::housekeeping::purge_idempotency_records(&app.pool).await.unwrap(), 1);
    assert_eq!(app.count("SELECT count(*) FROM idempotency_records").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_key_is_accepted_on_mutations_only_and_bounded(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    for (key, ok) in [("k".repeat(7), false), ("k".repeat(8), true), ("k".repeat(200), true), ("k".repeat(201), false)]
    {
        let response =
            app.op("workspaces/create", &owner.token, None, json!({ "name": "W", "idempotencyKey": key })).await;
        if ok {
            assert_ok("workspaces/create", &response);
        } else {
            let body = assert_problem(&response, 400, "invalid_request");
            assert_eq!(body["error"]["details"]["issues"][0]["path"], "/idempotencyKey");
        }
    }
    let body = assert_problem(
        &app.op("agents/list", &owner.token, None, json!({ "idempotencyKey": KEY })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/idempotencyKey");
}
