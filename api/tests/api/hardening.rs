//! Defects found by probing the call path under load, with faults and with
//! hostile clients: each test here failed before its fix.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_api::config::{DatabaseArgs, ServeConfig};
use svc_core::ids::{AgentId, UserId};
use svc_tests::raw::RawConn;

use crate::helpers::{TestApp, TestServer, TestUser, assert_ok, assert_problem, config, lock_waiters, waits_on_a_lock};

async fn user_uuid(app: &TestApp, user: &TestUser) -> uuid::Uuid {
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, None, json!({})).await);
    UserId::parse(data["user"]["id"].as_str().unwrap()).unwrap().0
}

/// Whether another transaction could take the idempotency lock of `key` now.
async fn key_is_free(pool: &PgPool, principal: uuid::Uuid, key: &str) -> bool {
    let mut tx = pool.begin().await.unwrap();
    let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(svc_core::idempotency::lock_id(principal, key))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    free
}

/// Defect 1: a replay, or a call whose handler failed, returned with its
/// transaction (and the key's lock) still open; sqlx rolled it back later in the
/// background, so a strictly sequential retry could find its own key "in
/// progress". Now every path ends its transaction before answering.
#[sqlx::test(migrations = "../migrations")]
async fn a_sequential_retry_never_finds_its_key_in_progress(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let principal = user_uuid(&app, &owner).await;
    let agent = app.agent(&owner, &ws, "Busy").await;
    // Other requests keep the pool and runtime busy meanwhile.
    let load = {
        let (app, token, agent) = (app.clone(), owner.token.clone(), agent.clone());
        tokio::spawn(async move {
            for _ in 0..400 {
                app.op("agents/inspect", &token, None, json!({ "agentId": agent })).await;
            }
        })
    };
    let created = json!({ "name": "Helper", "idempotencyKey": "replayed-key" });
    assert_ok("agents/create", &app.as_user(&owner, "agents/create", created.clone()).await);
    for i in 0..100 {
        let replay = app.as_user(&owner, "agents/create", created.clone()).await;
        assert_eq!(replay.header("idempotent-replayed"), Some("true"), "{}", replay.text());
        assert!(key_is_free(&app.pool, principal, "replayed-key").await, "held after replay {i}");
        // The handler fails inside the transaction, after the key was claimed.
        let key = format!("failing-key-{i}");
        let missing = json!({ "agentId": "agt_00000000000000000000000000", "confirm": true, "idempotencyKey": key });
        assert_problem(&app.as_user(&owner, "agents/delete", missing).await, 404, "resource_not_found");
        assert!(key_is_free(&app.pool, principal, &key).await, "held after failure {i}");
    }
    load.await.unwrap();
}

/// Defect 2: concurrent creates of one name all derived the same next slug,
/// and after ten rounds the rest failed with a 500.
#[sqlx::test(migrations = "../migrations")]
async fn concurrent_creates_of_one_name_get_distinct_slugs(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let responses = app
        .concurrently(24, |app, _| {
            let token = user.token.clone();
            async move { app.op("workspaces/create", &token, None, json!({ "name": "Acme" })).await }
        })
        .await;
    let mut slugs: Vec<String> = responses
        .iter()
        .map(|r| assert_ok("workspaces/create", r)["workspace"]["slug"].as_str().unwrap().to_owned())
        .collect();
    slugs.sort();
    let mut expected: Vec<String> = (1..=24).map(|n| svc_core::slug::candidate("acme", n)).collect();
    expected.sort();
    assert_eq!(slugs, expected);
}

/// An API on its own pool of `connections` to the test's database, letting
/// `writes` places per Workspace through its gate.
async fn with_a_pool_of(pool: &PgPool, connections: u32, writes: usize) -> TestApp {
    let url = {
        let o = pool.connect_options();
        format!("postgres://{}@{}:{}/{}", o.get_username(), o.get_host(), o.get_port(), o.get_database().unwrap())
    };
    let own = svc_core::runtime::connect(&url, "svc-api-test", connections, svc_core::runtime::Timeouts::SERVING);
    let database = DatabaseArgs { database_max_connections: connections, ..config().database };
    TestApp::with_config(own.unwrap(), ServeConfig { workspace_writes: writes, database, ..config() }).await
}

/// Defect 3: limit-consuming writes waited for their Workspace's lock while
/// holding pooled connections, so one tenant's flood starved every other
/// tenant. Now they wait for their turn without a connection, and only a few
/// of one Workspace (`SVC_WORKSPACE_WRITES`, here 2 places of a pool of 4) hold
/// connections at once. A held lock on the first tenant's usage row stands for
/// a long flood.
#[sqlx::test(migrations = "../migrations")]
async fn one_tenants_flood_does_not_stall_another(pool: PgPool) {
    // A small pool, as the pool of a loaded process is small beside its load.
    let app = with_a_pool_of(&pool, 4, 2).await;
    let (flooder, flooded) = app.owner("flooder").await;
    svc_core::admin::plan_set(&app.pool, &flooded, "pro", &[]).await.unwrap();
    let (reader, reader_ws) = app.owner("reader").await;
    let agent = app.agent(&reader, &reader_ws, "Steady").await;

    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage WHERE workspace_id = (SELECT id FROM workspaces WHERE slug = 'flooder-workspace') FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (app, token, ws) = (app.clone(), flooder.token.clone(), flooded.clone());
        flood
            .spawn(async move { app.op("agents/create", &token, Some(&ws), json!({ "name": format!("A{i}") })).await });
    }
    // Wait (bounded) until the flood is queued on the lock.
    waits_on_a_lock(&pool, "%workspace_usage%").await;
    let mut latencies = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let response = app.op("agents/inspect", &reader.token, None, json!({ "agentId": agent })).await;
        latencies.push(started.elapsed());
        assert_ok("agents/inspect", &response);
    }
    let blocked = lock_waiters(&pool, "%workspace_usage%").await;
    assert!(blocked <= 2, "{blocked} connections wait on one Workspace's lock");
    lock.rollback().await.unwrap();
    for response in flood.join_all().await {
        assert_ok("agents/create", &response);
    }
    latencies.sort();
    eprintln!(
        "the other tenant's agent.inspect during the flood: p50 {:?}, max {:?}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
    assert!(latencies[latencies.len() - 1] < Duration::from_secs(3), "{latencies:?}");
}

/// How many of `sent` writes went past the gate (they wait on a lock in a
/// statement matching `pattern`), once every one of them is accounted for:
/// past the gate, or waiting at it (`svc_workspace_gate_waiting`). One too
/// many let in shows as one fewer at the gate.
async fn past_the_gate(app: &TestApp, pattern: &str, sent: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let past = lock_waiters(&app.pool, pattern).await;
        let at_gate = app.metric("svc_workspace_gate_waiting").await as i64;
        if past + at_gate == sent {
            return past;
        }
        assert!(Instant::now() < deadline, "of {sent} writes, {past} past the gate and {at_gate} at it");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The gate's places (`SVC_WORKSPACE_WRITES`, here 4 of a pool of 8): a
/// source's add is counted on the usage shards, where adds of one Workspace
/// do not wait for each other, so 4 go in at once; an Agent's create is
/// counted on the usage row, where creates queue anyway, so only 2 hold
/// connections. Before, every write took one place: 4 creates waited on the
/// row.
#[sqlx::test(migrations = "../migrations")]
async fn adds_take_one_place_at_the_gate_and_creates_two(pool: PgPool) {
    let app = with_a_pool_of(&pool, 8, 4).await;
    let (owner, ws) = app.owner("importer").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let agent = app.agent(&owner, &ws, "Helper").await;

    // Adds wait on the Agent's row, past the gate.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM agents FOR UPDATE").execute(&mut *holder).await.unwrap();
    let mut adds = tokio::task::JoinSet::new();
    for i in 0..10 {
        let (app, token, ws, agent) = (app.clone(), owner.token.clone(), ws.clone(), agent.clone());
        adds.spawn(async move {
            let input = crate::knowledge::add_input(&agent, &format!("doc-{i}"), "The office opens at nine.");
            app.op("knowledge-sources/add", &token, Some(&ws), input).await
        });
    }
    assert_eq!(past_the_gate(&app, "%FROM agents%", 10).await, 4, "adds inside the gate at once");
    holder.rollback().await.unwrap();
    for response in adds.join_all().await {
        assert_ok("knowledge-sources/add", &response);
    }

    // Creates wait on the usage row, past the gate.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage FOR UPDATE").execute(&mut *holder).await.unwrap();
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..10 {
        let (app, token, ws) = (app.clone(), owner.token.clone(), ws.clone());
        creates
            .spawn(async move { app.op("agents/create", &token, Some(&ws), json!({ "name": format!("A{i}") })).await });
    }
    assert_eq!(past_the_gate(&app, "%workspace_usage%", 10).await, 2, "creates inside the gate at once");
    holder.rollback().await.unwrap();
    for response in creates.join_all().await {
        assert_ok("agents/create", &response);
    }
}

/// Defect 5: only creates checked archived and Entitlement state again under
/// the lock they wrote under. A mutation that passed its checks before an
/// archive committed still wrote. Now every mutation holds the Workspace row.
#[sqlx::test(migrations = "../migrations")]
async fn an_archive_committing_mid_call_stops_every_mutation(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let agent = app.agent(&owner, &ws, "Helper").await;
    let doomed = app.agent(&owner, &ws, "Doomed").await;
    let (key, _) = app.api_key(&owner, &ws, json!({ "preset": "operator" })).await;
    let cases = [
        ("agents/configure", json!({ "agentId": agent, "name": "Changed" })),
        ("agents/delete", json!({ "agentId": doomed, "confirm": true })),
        ("workspaces/rename", json!({ "name": "Renamed" })),
        ("api-keys/rotate", json!({ "apiKeyId": key })),
        ("agents/create", json!({ "name": "New" })),
        ("public-chats/enable", json!({ "agentId": agent })),
        ("public-chats/disable", json!({ "agentId": agent, "confirm": agent })),
        ("widgets/configure", json!({ "agentId": agent, "configuration": { "showBranding": false } })),
        // An add holds the Workspace in its own statement (an Agent id that
        // names no Agent is found out there); an input it cannot send (an
        // Agent id that cannot be one, a wrong digest) is refused after the
        // runner's hold.
        ("knowledge-sources/add", crate::knowledge::add_input(&agent, "new", "New.")),
        ("knowledge-sources/add", {
            let mut wrong = crate::knowledge::add_input(&agent, "new", "New.");
            wrong["digest"] = json!(svc_contract::digest::sha256_prefixed(b"Other."));
            wrong
        }),
        ("knowledge-sources/add", crate::knowledge::add_input("agt_nothing", "new", "New.")),
        ("knowledge-sources/add", crate::knowledge::add_input(&AgentId::new().to_string(), "new", "New.")),
    ];
    for (path, input) in cases {
        // The archive is written but not committed: the call's checks pass.
        let mut archive = app.pool.begin().await.unwrap();
        sqlx::query("UPDATE workspaces SET status = 'archived' WHERE slug = 'alice-workspace'")
            .execute(&mut *archive)
            .await
            .unwrap();
        let call = {
            let (app, token, ws) = (app.clone(), owner.token.clone(), ws.clone());
            tokio::spawn(async move { app.op(path, &token, Some(&ws), input).await })
        };
        assert!(waits_on_a_lock(&app.pool, "%FOR SHARE%").await, "{path} never waited for the Workspace");
        archive.commit().await.unwrap();
        assert_problem(&call.await.unwrap(), 409, "workspace_archived");
        svc_core::admin::set_archived(&app.pool, &ws, false).await.unwrap();
    }
    let agents = assert_ok("agents/list", &app.op("agents/list", &owner.token, Some(&ws), json!({})).await);
    let names: Vec<&str> = agents["agents"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Helper", "Doomed"], "nothing was written");
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM workspaces WHERE name = 'Renamed'").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM public_chats").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM widget_configurations").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM knowledge_sources").await, 0);
}

/// Defect 8: a `Svc-Workspace` header that is not visible ASCII was ignored,
/// as if absent. It names no Workspace one may select.
#[sqlx::test(migrations = "../migrations")]
async fn an_unreadable_workspace_header_names_no_workspace(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (_, secret) = app.api_key(&owner, &ws, json!({ "preset": "operator" })).await;
    let send = |token: String| {
        let app = app.clone();
        async move {
            let request = http::Request::builder()
                .method("POST")
                .uri("/api/public/operations/agents/list")
                .header("authorization", format!("Bearer {token}"))
                .header("svc-workspace", http::HeaderValue::from_bytes(b"caf\xe9").unwrap())
                .body(axum::body::Body::from("{}"))
                .unwrap();
            app.send(request).await
        }
    };
    let body = assert_problem(&send(secret).await, 403, "permission_denied");
    assert_eq!(body["error"]["details"]["reason"], "foreign_workspace");
    let body = assert_problem(&send(owner.token.clone()).await, 400, "workspace_selection_required");
    assert_eq!(body["error"]["details"]["reason"], "unknown_workspace");
}

fn request(path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut text = format!("POST /api/public/operations/{path} HTTP/1.1\r\nhost: svc.test\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    text.into_bytes()
}

fn assert_envelope(response: &svc_tests::raw::RawResponse, status: u16, reason: &str) {
    assert_eq!(response.status, status, "{}", String::from_utf8_lossy(&response.body));
    let body = response.json();
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], reason);
    let request_id = body["meta"]["requestId"].as_str().unwrap();
    assert!(request_id.starts_with("req_"));
    assert_eq!(response.header("x-request-id"), Some(request_id));
}

/// Defect 7: requests hyper could not parse got an empty 400 or 431 without a
/// request id. Each case is its own connection, since a refusal closes it.
#[sqlx::test(migrations = "../migrations")]
async fn malformed_requests_get_the_error_envelope(pool: PgPool) {
    let server = TestServer::start(pool, config()).await;
    let many_headers: String = (0..101).map(|i| format!("x-h{i}: v\r\n")).collect();
    let big_header = format!("x-big: {}\r\n", "a".repeat(70 * 1024));
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"GARBAGE\r\n\r\n".to_vec(), 400, "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\nbad header\r\n\r\n".to_vec(), 400, "malformed_request"),
        (
            b"POST /healthz HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n{}".to_vec(),
            400,
            "duplicate_content_length",
        ),
        (b"POST /healthz HTTP/1.1\r\ncontent-length: -1\r\n\r\n".to_vec(), 400, "invalid_content_length"),
        (
            b"POST /healthz HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n".to_vec(),
            400,
            "content_length_with_transfer_encoding",
        ),
        (b"POST /healthz HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n".to_vec(), 400, "unsupported_transfer_encoding"),
        (format!("GET /healthz HTTP/1.1\r\n{many_headers}\r\n").into_bytes(), 431, "too_many_headers"),
        (format!("GET /healthz HTTP/1.1\r\n{big_header}\r\n").into_bytes(), 431, "head_too_large"),
    ];
    for (bytes, status, reason) in cases {
        let mut conn = RawConn::connect(server.addr).await;
        conn.send(&bytes).await;
        let response = conn.response().await.unwrap_or_else(|| panic!("no answer to {reason}"));
        assert_envelope(&response, status, reason);
        assert_eq!(response.header("connection"), Some("close"));
        assert!(conn.closed().await);
    }
    // A refused head after a good request on the same connection: the good
    // answer comes first, whole, then the refusal.
    let mut conn = RawConn::connect(server.addr).await;
    let mut bytes = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n".to_vec();
    bytes.extend_from_slice(b"NOT HTTP AT ALL\r\n\r\n");
    conn.send(&bytes).await;
    assert_eq!(conn.response().await.unwrap().status, 200);
    assert_envelope(&conn.response().await.unwrap(), 400, "malformed_request");
    server.shut_down().await;
}

/// The guard in front of hyper leaves good traffic alone: keep-alive,
/// pipelining, chunked bodies with extensions and trailers, bodies split
/// across writes.
#[sqlx::test(migrations = "../migrations")]
async fn well_formed_traffic_passes_the_guard(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let user = app.user("alice").await;
    let server = TestServer::start(pool, config()).await;
    let auth = format!("Bearer {}", user.token);
    let mut conn = RawConn::connect(server.addr).await;
    let create = request("workspaces/create", &[("authorization", &auth)], r#"{"name":"One"}"#);
    conn.send(&create[..20]).await;
    conn.send(&create[20..]).await;
    assert_eq!(conn.response().await.unwrap().status, 200);
    // Two pipelined requests, the second chunked with an extension and a trailer.
    let chunked = format!(
        "POST /api/public/operations/workspaces/create HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\n\
         transfer-encoding: chunked\r\n\r\n5;ext=1\r\n{{\"nam\r\n9\r\ne\":\"Two\"}}\r\n0\r\nx-trailer: 1\r\n\r\n"
    );
    let mut both = create.clone();
    both.extend_from_slice(chunked.as_bytes());
    conn.send(&both).await;
    assert_eq!(conn.response().await.unwrap().status, 200);
    let second = conn.response().await.unwrap();
    assert_eq!(second.status, 200, "{}", String::from_utf8_lossy(&second.body));
    assert_eq!(second.json()["data"]["workspace"]["name"], "Two");
    conn.send(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(conn.response().await.unwrap().status, 200);
    server.shut_down().await;
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 3);
}

/// Defect 9: an answer sent before the body was read (a 401 here) closed the
/// connection without saying so. A small body is read and the connection kept;
/// a body too large to read says `Connection: close`.
#[sqlx::test(migrations = "../migrations")]
async fn early_answers_keep_or_close_the_connection_openly(pool: PgPool) {
    let server = TestServer::start(pool, config()).await;
    let mut conn = RawConn::connect(server.addr).await;
    let unauthenticated = request("agents/list", &[], &format!("{{\"pad\":\"{}\"}}", "x".repeat(2000)));
    for _ in 0..3 {
        conn.send(&unauthenticated).await;
        let response = conn.response().await.expect("an answer on the same connection");
        assert_eq!(response.status, 401);
        assert_eq!(response.header("connection"), None);
    }
    // 200 KiB declared and not sent: answered at once, and the connection closed.
    let mut conn = RawConn::connect(server.addr).await;
    conn.send(b"POST /api/public/operations/agents/list HTTP/1.1\r\nhost: x\r\ncontent-length: 204800\r\n\r\n{").await;
    let response = conn.response().await.unwrap();
    assert_eq!(response.status, 401);
    assert_eq!(response.header("connection"), Some("close"));
    assert!(conn.closed().await);
    server.shut_down().await;
}

/// Defect 4: a head or body that never finished arriving held its connection
/// for ever, and made shutdown wait the whole grace period.
#[sqlx::test(migrations = "../migrations")]
async fn slow_heads_and_bodies_are_cut_off(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let user = app.user("alice").await;
    let mut config = config();
    config.header_read_timeout_secs = 1;
    config.body_read_timeout_secs = 1;
    let server = TestServer::start(pool, config).await;
    // Half a head: the connection is closed.
    let mut half = RawConn::connect(server.addr).await;
    half.send(b"POST /api/public/operations/workspaces/create HTTP/1.1\r\nhost: x\r\n").await;
    assert!(half.closed().await);
    // A trickled body: 408 with the envelope, then closed.
    let mut trickle = RawConn::connect(server.addr).await;
    let head = format!(
        "POST /api/public/operations/workspaces/create HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\
         content-length: 100\r\n\r\n",
        user.token
    );
    trickle.send(head.as_bytes()).await;
    // A byte every 300 ms: past the 1 s deadline for 100 bytes long before the end.
    for _ in 0..10 {
        if !trickle.try_send(b"x").await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let response = trickle.response().await.expect("an answer");
    assert_envelope(&response, 408, "body_timeout");
    assert!(trickle.closed().await);
    server.shut_down().await;
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 0);
}

/// Defect 6: MCP transport failures answered plain text, or the wrong JSON-RPC
/// code. Every one now has a JSON body and the request id.
#[sqlx::test(migrations = "../migrations")]
async fn mcp_transport_failures_are_json(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _) = app.owner("alice").await;
    let post = |headers: Vec<(&'static str, String)>, body: axum::body::Body| {
        let app = app.clone();
        let token = owner.token.clone();
        async move {
            let mut request = http::Request::builder()
                .method("POST")
                .uri("/api/mcp")
                .header("host", "svc.test")
                .header("authorization", format!("Bearer {token}"));
            for (name, value) in headers {
                request = request.header(name, value);
            }
            app.send(request.body(body).unwrap()).await
        }
    };
    let json_headers = || {
        vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
        ]
    };
    let rpc_error = |response: &svc_tests::http::TestResponse, status: u16, code: i64| {
        assert_eq!(response.status, status, "{}", response.text());
        let body = response.json();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["error"]["code"], code, "{body}");
        let request_id = body["error"]["data"]["requestId"].as_str().unwrap();
        assert_eq!(response.header("x-request-id"), Some(request_id));
    };
    rpc_error(&post(json_headers(), "{not json".into()).await, 400, -32700);
    let batch = json!([{ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }]).to_string();
    rpc_error(&post(json_headers(), batch.into()).await, 400, -32600);
    let old = json!({ "jsonrpc": "1.0", "id": 1, "method": "tools/list" }).to_string();
    rpc_error(&post(json_headers(), old.into()).await, 400, -32600);
    // The same for a tool call, which the gate may answer itself.
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_agent_list", "arguments": {} } });
    let batch = json!([call]).to_string();
    rpc_error(&post(json_headers(), batch.into()).await, 400, -32600);
    for version in [json!("1.0"), Value::Null] {
        let mut call = call.clone();
        call["jsonrpc"] = version;
        rpc_error(&post(json_headers(), call.to_string().into()).await, 400, -32600);
    }
    let mut unversioned = call.clone();
    unversioned.as_object_mut().unwrap().remove("jsonrpc");
    rpc_error(&post(json_headers(), unversioned.to_string().into()).await, 400, -32600);
    for arguments in [json!([1]), json!("x"), json!(3)] {
        let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": { "name": "svc_agent_list", "arguments": arguments } })
        .to_string();
        let response = post(json_headers(), call.into()).await;
        rpc_error(&response, 200, -32602);
        assert_eq!(response.json()["id"], 7);
    }
    // HTTP-level refusals: the error envelope.
    let tools_list = || json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }).to_string();
    let without_accept = vec![("content-type", "application/json".to_owned())];
    let response = post(without_accept, tools_list().into()).await;
    assert_problem(&response, 406, "invalid_request");
    let text =
        vec![("content-type", "text/plain".to_owned()), ("accept", "application/json, text/event-stream".to_owned())];
    assert_problem(&post(text, tools_list().into()).await, 415, "invalid_request");
    // A chunked body (no Content-Length) over the cap, refused as it streams.
    let response =
        post(json_headers(), axum::body::Body::new(Repeat(bytes::Bytes::from(vec![b' '; 1 << 20]), 140))).await;
    let body = assert_problem(&response, 413, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "body_too_large");
    // Over the called tool's own limit (1 MiB for agent.create).
    let big = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_agent_create", "arguments": { "name": "x".repeat(1200 * 1024) } } })
    .to_string();
    let body = assert_problem(&post(json_headers(), big.into()).await, 413, "invalid_request");
    assert_eq!(body["error"]["details"]["limit"], 1024 * 1024);
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 0);
}

/// `n` copies of a chunk, as a body of unknown length.
struct Repeat(bytes::Bytes, usize);

impl http_body::Body for Repeat {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>> {
        if self.1 == 0 {
            return std::task::Poll::Ready(None);
        }
        self.1 -= 1;
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(self.0.clone()))))
    }
}

/// Defect 10: the OpenAPI document declares every status the call path answers.
#[sqlx::test(migrations = "../migrations")]
async fn openapi_declares_what_the_call_path_answers(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (_, read_only) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let openapi = svc_contract::openapi::document();
    let declared = |path: &str, status: u16| -> String {
        openapi["paths"][format!("/api/public/operations/{path}")]["post"]["responses"]
            .get(status.to_string())
            .map(|r| r["description"].to_string())
            .unwrap_or_default()
    };
    // A key without agent:write on agent.configure: permission_denied, which the
    // spec's table omits for it.
    let response = app.op("agents/configure", &read_only, None, json!({ "agentId": "agt_x" })).await;
    assert_problem(&response, 403, "permission_denied");
    assert!(declared("agents/configure", 403).contains("permission_denied"));
    let wrong_method = app
        .send(http::Request::get("/api/public/operations/agents/list").body(axum::body::Body::empty()).unwrap())
        .await;
    assert_eq!(wrong_method.status, 405);
    for op in &svc_contract::CATALOG {
        assert!(!declared(op.path, 405).is_empty(), "{}", op.id);
        let required = op.input_schema().get("required").and_then(Value::as_array).is_some_and(|r| !r.is_empty());
        let body = &openapi["paths"][format!("/api/public/operations/{}", op.path)]["post"]["requestBody"];
        assert_eq!(body["required"], Value::Bool(required), "{}", op.id);
    }
}

/// Defect 12: the lookup of derived-slug candidates (`LIKE prefix%`) could not
/// use an index under a non-C collation. Slugs are compared byte by byte now,
/// and the lookup is a range of the unique index, checked with 20,000 rows.
#[sqlx::test(migrations = "../migrations")]
async fn derived_slug_lookups_use_the_index(pool: PgPool) {
    sqlx::query(
        "INSERT INTO workspaces (id, name, slug, plan) \
         SELECT gen_random_uuid(), 'W', 'acme-' || n, 'trial' FROM generate_series(1, 20000) n",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE workspaces").execute(&pool).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let (from, to) = ("acme-19", "acme-19~");
    sqlx::query("PREPARE candidates(text, text) AS SELECT slug FROM workspaces WHERE slug >= $1 AND slug < $2")
        .execute(&mut *conn)
        .await
        .unwrap();
    // Generic plans (what a prepared statement settles on) included.
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *conn).await.unwrap();
    let plan: Vec<String> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN EXECUTE candidates('{from}', '{to}')")))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("workspaces_slug_key") && !plan.contains("Seq Scan"), "{plan}");
    let (found,): (i64,) = sqlx::query_as("SELECT count(*) FROM workspaces WHERE slug >= $1 AND slug < $2")
        .bind(from)
        .bind(to)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(found, 1 + 10 + 100 + 1000);
}
