//! The HTTP surface: routing, bodies, bad input, discovery, health (contract §1, §2).

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_contract::{CATALOG, catalog};

use crate::helpers::{TestApp, assert_ok, assert_problem};

#[sqlx::test(migrations = "../migrations")]
async fn bad_input_gets_a_stable_code_and_changes_nothing(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let auth = format!("Bearer {}", user.token);
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let cases: Vec<(&str, &str, &str)> = vec![
        ("{\"name\": ", "malformed_json", ""),
        ("{\"name\": \"x\",}", "malformed_json", ""),
        ("not json", "malformed_json", ""),
        ("[]", "", ""),
        ("\"x\"", "", ""),
        ("{\"name\": 5}", "", "/name"),
        ("{\"name\": \"x\", \"extra\": true}", "", "/extra"),
        ("{\"name\": \"x\", \"slug\": null}", "", "/slug"),
        ("{}", "", "/name"),
        ("{\"name\": \"a\\u0000b\"}", "", "/name"),
    ];
    for (body, reason, path) in cases {
        let response = app.post_raw("workspaces/create", &headers, body.to_owned()).await;
        let problem = assert_problem(&response, 400, "invalid_request");
        if reason.is_empty() {
            assert_eq!(problem["error"]["details"]["issues"][0]["path"], path, "{body}");
        } else {
            assert_eq!(problem["error"]["details"]["reason"], reason, "{body}");
        }
    }
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn every_violation_is_listed_at_once(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _) = app.owner("alice").await;
    let input = json!({ "name": "", "temperature": 9, "defaultLanguage": "fr", "color": "blue" });
    let body = assert_problem(&app.op("agents/create", &owner.token, None, input).await, 400, "invalid_request");
    let paths: Vec<&str> =
        body["error"]["details"]["issues"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/color", "/defaultLanguage", "/name", "/temperature"]);
    for issue in body["error"]["details"]["issues"].as_array().unwrap() {
        assert!(!issue["message"].as_str().unwrap().is_empty());
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn an_empty_body_is_an_empty_object(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let auth = format!("Bearer {}", user.token);
    let response = app.post_raw("identity/status", &[("authorization", auth.as_str())], "").await;
    assert_ok("identity/status", &response);
    // JSON's whitespace around nothing is nothing too.
    let response = app.post_raw("identity/status", &[("authorization", auth.as_str())], " \t\r\n").await;
    assert_ok("identity/status", &response);
}

/// Found by scripts/check-api-schema: a body of a form feed (or any byte Rust
/// calls ASCII whitespace but JSON does not) was read as empty, so `{}`.
#[sqlx::test(migrations = "../migrations")]
async fn a_body_of_whitespace_json_does_not_allow_is_malformed(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let auth = format!("Bearer {}", user.token);
    for body in ["\x0c", " \x0c\n", "\x0b"] {
        let response = app.post_raw("identity/status", &[("authorization", auth.as_str())], body).await;
        let problem = assert_problem(&response, 400, "invalid_request");
        assert_eq!(problem["error"]["details"]["reason"], "malformed_json", "{body:?}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn unknown_paths_and_methods(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let body = assert_problem(&app.op("agents/explode", &user.token, None, json!({})).await, 404, "resource_not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("agents/explode"));
    let response = app.send(http::Request::get("/nowhere").body(axum::body::Body::empty()).unwrap()).await;
    assert_problem(&response, 404, "resource_not_found");
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        let request = http::Request::builder().method(method).uri("/api/public/operations/agents/list");
        let response = app.send(request.body(axum::body::Body::empty()).unwrap()).await;
        assert_problem(&response, 405, "invalid_request");
        assert_eq!(response.header("allow"), Some("POST"));
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn bodies_over_the_limit_get_413(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let auth = format!("Bearer {}", user.token);
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let limit = 1024 * 1024;
    // At the limit: read (and refused by the schema for its content, not its size).
    let at_limit = format!("{{\"name\": \"{}\"}}", "x".repeat(limit - 12));
    assert_eq!(at_limit.len(), limit);
    let body = assert_problem(&app.post_raw("workspaces/create", &headers, at_limit).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/name");
    // One byte over, declared in Content-Length: refused before reading.
    let over = format!("{{\"name\": \"{}\"}}", "x".repeat(limit - 11));
    let length = over.len().to_string();
    let declared = [headers[0], headers[1], ("content-length", length.as_str())];
    let body =
        assert_problem(&app.post_raw("workspaces/create", &declared, over.clone()).await, 413, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "body_too_large");
    assert_eq!(body["error"]["details"]["limit"], limit);
    // One byte over without a declared length: refused while reading.
    assert_problem(&app.post_raw("workspaces/create", &headers, over).await, 413, "invalid_request");
    // A lying Content-Length above the limit is refused too, whatever follows.
    let lying = [headers[0], headers[1], ("content-length", "999999999")];
    assert_problem(&app.post_raw("workspaces/create", &lying, "{}").await, 413, "invalid_request");
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn discovery_needs_no_credentials(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let get = |path: &'static str| app.send(http::Request::get(path).body(axum::body::Body::empty()).unwrap());
    let config = get("/api/public/client-config").await;
    assert_eq!(config.status, 200);
    assert!(config.header("x-request-id").unwrap().starts_with("req_"));
    assert_eq!(
        config.json(),
        json!({
            "contract": "1",
            "catalogDigest": catalog::catalog_digest(),
            "supportedClientRange": "^0.1.2",
            "mcpEndpoint": "http://svc.test/api/mcp",
            "oauth": { "issuer": svc_tests::ISSUER, "clientId": "svc-cli", "scopes": ["openid"] }
        })
    );
    let published = get("/api/public/catalog").await.json();
    assert_eq!(published["contract"], "1");
    assert_eq!(published["operations"].as_array().unwrap().len(), 30);
    let recomputed = svc_contract::digest::sha256_jcs(&published["operations"]);
    assert_eq!(published["catalogDigest"], recomputed, "the digest is over what is published");
    let checked_in: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/catalog.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(published, checked_in);
    let openapi = get("/api/public/openapi.json").await.json();
    assert_eq!(openapi["openapi"], "3.1.0");
    assert_eq!(openapi["servers"][0]["url"], "http://svc.test");
    assert_eq!(openapi["paths"].as_object().unwrap().len(), 30);
    for op in &CATALOG {
        let path = format!("/api/public/operations/{}", op.path);
        assert_eq!(openapi["paths"][&path]["post"]["operationId"], op.id);
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn health_readiness_and_metrics(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let get = |path: &'static str| app.send(http::Request::get(path).body(axum::body::Body::empty()).unwrap());
    let health = get("/healthz").await;
    assert_eq!((health.status, health.json()), (200, json!({ "status": "ok" })));
    assert!(health.header("x-request-id").is_some());
    let ready = get("/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"], json!({ "database": "ok", "redis": "ok" }));
    let user = app.user("alice").await;
    app.op("identity/status", &user.token, None, json!({})).await;
    app.op("agents/list", &user.token, None, json!({})).await;
    let metrics = get("/metrics").await;
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    assert!(
        text.contains(r#"svc_operation_calls_total{surface="http",operation="identity.status",outcome="ok"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"svc_operation_calls_total{surface="http",operation="agent.list",outcome="workspace_selection_required"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"svc_operation_duration_seconds_count{surface="http",operation="identity.status"} 1"#));
    assert!(!text.contains(&user.token), "credentials never reach metrics");
}

#[sqlx::test(migrations = "../migrations")]
async fn readiness_reports_an_unreachable_redis(pool: PgPool) {
    let mut config = crate::helpers::config();
    config.redis_url = secrecy::SecretString::from("redis://127.0.0.1:1");
    let app = TestApp::with_config(pool, config).await;
    let ready = app.send(http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap()).await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"], json!({ "database": "ok", "redis": "unreachable" }));
}

/// An unreachable database is `internal_error` answered 503 with `Retry-After`
/// on both surfaces, and `/readyz` says so.
#[tokio::test]
async fn an_unreachable_database_is_a_503() {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let app = TestApp::new(pool).await;
    let token = app.issuer().token("anyone");
    for response in [
        app.op("identity/status", &token, None, json!({})).await,
        app.mcp(Some(&token), None, json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" })).await,
    ] {
        let body = assert_problem(&response, 503, "internal_error");
        assert_eq!(response.header("retry-after"), Some("5"));
        assert!(!body["error"]["message"].as_str().unwrap().contains("127.0.0.1"), "no internals in the message");
    }
    let ready = app.send(http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap()).await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"]["database"], "unreachable");
}

/// A database nobody migrated: `/readyz` says so, and every call is a 503 with
/// `Retry-After` (an operator's `svc-api migrate` away), not a 500.
#[sqlx::test(migrations = false)]
async fn an_unmigrated_database_is_unready_and_answers_503(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let ready = app.send(http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap()).await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"]["database"], "unmigrated");
    let token = app.issuer().token("anyone");
    for response in [
        app.op("identity/status", &token, None, json!({})).await,
        app.mcp(Some(&token), None, json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" })).await,
    ] {
        assert_problem(&response, 503, "internal_error");
        assert_eq!(response.header("retry-after"), Some("5"));
    }
}

/// A database missing one of this binary's migrations is not ready.
#[sqlx::test(migrations = "../migrations")]
async fn a_database_behind_the_binary_is_unready(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let readyz = || app.send(http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap());
    assert_eq!(readyz().await.status, 200);
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)")
        .execute(&pool)
        .await
        .unwrap();
    let ready = readyz().await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"]["database"], "behind");
}

/// An unknown operation path names the one a slip most likely meant.
#[sqlx::test(migrations = "../migrations")]
async fn an_unknown_operation_suggests_the_nearest(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let body = assert_problem(&app.op("agent/create", &user.token, None, json!({})).await, 404, "resource_not_found");
    assert_eq!(body["error"]["details"]["suggestion"], "agents/create");
    assert!(body["error"]["message"].as_str().unwrap().contains("did you mean `agents/create`"), "{body}");
    let body = assert_problem(&app.op("billing/charge", &user.token, None, json!({})).await, 404, "resource_not_found");
    assert!(body["error"].get("details").is_none_or(|d| d.get("suggestion").is_none()), "{body}");
}

/// A path that is not even text (bad percent-encoding) gets the envelope, not
/// the framework's plain-text refusal, on every route with a path parameter.
#[sqlx::test(migrations = "../migrations")]
async fn undecodable_paths_get_the_envelope(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    assert_problem(&app.op("%FF", &user.token, None, json!({})).await, 404, "resource_not_found");
    let request = |method: &str, uri: &str| {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .header("origin", "https://shop.example")
            .body(axum::body::Body::from("{}"))
            .unwrap()
    };
    assert_problem(&app.send(request("POST", "/api/public/chat/%FF/answers")).await, 404, "resource_not_found");
    assert_problem(&app.send(request("OPTIONS", "/api/public/chat/%FF/answers")).await, 404, "resource_not_found");
    let page = app.send(request("GET", "/chat/%FF")).await;
    assert_eq!(page.status, 404);
    assert!(page.header("content-type").unwrap().starts_with("text/html"), "the 404 page");
}

/// A body that never arrives; says when it is first asked for.
struct Stalled(Option<tokio::sync::mpsc::UnboundedSender<()>>);

impl axum::body::HttpBody for Stalled {
    type Data = axum::body::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Some(reading) = self.get_mut().0.take() {
            let _ = reading.send(());
        }
        std::task::Poll::Pending
    }
}

/// Clients that announce a small body and never send it do not keep database
/// connections: with a pool of one, other requests still get answered.
#[sqlx::test(migrations = "../migrations")]
async fn stalled_bodies_do_not_hold_the_pool(
    _: sqlx::postgres::PgPoolOptions,
    options: sqlx::postgres::PgConnectOptions,
) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(3))
        .connect_with(options)
        .await
        .unwrap();
    let app = TestApp::new(pool).await;
    let (owner, _) = app.owner("alice").await;
    let mut stalled = Vec::new();
    let (reading, mut read) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let request = http::Request::post("/api/public/operations/agents/create")
            .header("authorization", format!("Bearer {}", owner.token))
            .header("content-length", "100")
            .body(axum::body::Body::new(Stalled(Some(reading.clone()))))
            .unwrap();
        let app = app.clone();
        stalled.push(tokio::spawn(async move { app.send(request).await }));
    }
    // Each request authenticated (with the one connection) and began to read
    // its body; then the connection is back in the pool, the bodies still
    // awaited.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for _ in 0..3 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        tokio::time::timeout(left, read.recv()).await.expect("every request reads its body").unwrap();
    }
    while app.pool.num_idle() < 1 {
        assert!(std::time::Instant::now() < deadline, "the connection never went back to the pool");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let started = std::time::Instant::now();
    assert_ok("identity/status", &app.op("identity/status", &owner.token, None, json!({})).await);
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "answered without waiting for a connection");
    for task in stalled {
        assert!(!task.is_finished(), "the stalled requests are still waiting for their bodies");
        task.abort();
    }
}
