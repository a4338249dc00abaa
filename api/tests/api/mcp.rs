//! The MCP surface: the same catalog, data and problems as HTTP (contract §13).

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_contract::CATALOG;

use crate::helpers::{TestApp, assert_ok, assert_problem, waits_on_a_lock};
use crate::resource_metadata::MCP_CHALLENGE;

/// The JSON-RPC result of a tools/call.
fn tool_result(response: &svc_tests::http::TestResponse) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert!(body.get("error").is_none(), "a JSON-RPC error: {body}");
    body["result"].clone()
}

/// The envelope and whether it is an error, checking the text copy matches.
fn envelope(response: &svc_tests::http::TestResponse) -> (bool, Value) {
    let result = tool_result(response);
    let structured = result["structuredContent"].clone();
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, structured, "content carries the same JSON");
    assert_eq!(result["content"].as_array().unwrap().len(), 1);
    let request_id = structured["meta"]["requestId"].as_str().unwrap();
    assert_eq!(response.header("x-request-id"), Some(request_id));
    (result["isError"] == true, structured)
}

fn without_request_id(mut body: Value) -> Value {
    body["meta"].as_object_mut().unwrap().remove("requestId");
    body
}

/// The same calls over HTTP and MCP give the same data or the same problem.
#[sqlx::test(migrations = "../migrations")]
async fn http_and_mcp_agree(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let agent = app.agent(&owner, &ws, "Helper").await;
    // Two Agents: a page of one has a next cursor.
    app.agent(&owner, &ws, "Second").await;
    let (mallory, _) = app.owner("mallory").await;
    let member = app.user("bob").await;
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "bob", "member").await.unwrap();
    let cases: Vec<(&str, &str, &str, Option<&str>, Value)> = vec![
        ("identity/status", "svc_identity_status", &owner.token, None, json!({})),
        ("workspaces/list", "svc_workspace_list", &owner.token, None, json!({ "pageSize": 10 })),
        ("workspaces/inspect", "svc_workspace_inspect", &owner.token, None, json!({})),
        ("workspaces/entitlements/inspect", "svc_workspace_entitlements_inspect", &owner.token, None, json!({})),
        ("agents/list", "svc_agent_list", &owner.token, None, json!({})),
        ("agents/list", "svc_agent_list", &owner.token, None, json!({ "pageSize": 1 })),
        ("agents/inspect", "svc_agent_inspect", &owner.token, None, json!({ "agentId": agent })),
        ("agents/inspect", "svc_agent_inspect", &mallory.token, None, json!({ "agentId": agent })),
        ("agents/inspect", "svc_agent_inspect", &owner.token, None, json!({ "agentId": agent, "extra": 1 })),
        ("agents/create", "svc_agent_create", &owner.token, None, json!({ "name": "x".repeat(121) })),
        ("agents/delete", "svc_agent_delete", &owner.token, None, json!({ "agentId": agent })),
        ("workspaces/rename", "svc_workspace_rename", &member.token, Some(&ws), json!({ "name": "Mine" })),
        ("workspaces/inspect", "svc_workspace_inspect", &owner.token, Some("nope"), json!({})),
        ("agents/configure", "svc_agent_configure", &owner.token, None, json!({ "agentId": agent, "temperature": 1 })),
        ("widgets/manifest", "svc_widget_manifest", &owner.token, None, json!({ "agentId": agent })),
        ("widgets/manifest", "svc_widget_manifest", &mallory.token, None, json!({ "agentId": agent })),
        ("public-chats/disable", "svc_public_chat_disable", &owner.token, None, json!({ "agentId": agent })),
        (
            "widgets/configure",
            "svc_widget_configure",
            &owner.token,
            None,
            json!({ "agentId": agent, "configuration": { "allowedOrigins": ["https://a.example/"] } }),
        ),
    ];
    for (path, tool, token, workspace, input) in cases {
        let http = app.op(path, token, workspace, input.clone()).await;
        let mcp = app.tool(token, workspace, tool, input.clone()).await;
        let (is_error, structured) = envelope(&mcp);
        if input == json!({ "pageSize": 1 }) {
            assert!(structured["meta"]["nextCursor"].is_string(), "a page of one of two: {structured}");
        }
        assert_eq!(is_error, http.status != 200, "{tool} {input}");
        assert_eq!(without_request_id(structured), without_request_id(http.json()), "{tool} {input}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn tools_list_is_the_catalog(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    // No initialize is needed: the server is stateless.
    let response = app.mcp(Some(&user.token), None, json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list" })).await;
    let tools = tool_result(&response)["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 30);
    for (tool, op) in tools.iter().zip(CATALOG.iter()) {
        assert_eq!(tool["name"], op.tool_name());
        assert_eq!(tool["description"], op.summary);
        assert_eq!(tool["inputSchema"], Value::Object(op.input_schema().clone()), "{}", op.id);
        assert_eq!(tool["outputSchema"], Value::Object(op.output_schema().clone()), "{}", op.id);
        assert_eq!(tool["annotations"]["readOnlyHint"], !op.mutating);
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn initialize_works_without_a_session(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "test", "version": "1" } } });
    let response = app.mcp(Some(&user.token), None, message).await;
    let result = tool_result(&response);
    assert_eq!(result["serverInfo"]["name"], "svc");
    assert!(result["capabilities"]["tools"].is_object());
    assert!(response.header("mcp-session-id").is_none());
}

#[sqlx::test(migrations = "../migrations")]
async fn bad_credentials_are_refused_before_json_rpc(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    for (token, reason) in [
        (None, "missing_credential"),
        (Some("${SVC_API_KEY}"), "unexpanded_placeholder"),
        (Some("garbage"), "malformed_token"),
        (Some("svck_unknown_0000"), "unknown_api_key"),
    ] {
        let response = app.mcp(token, None, list.clone()).await;
        let body = assert_problem(&response, 401, "authentication_required");
        assert_eq!(body["error"]["details"]["reason"], reason);
        assert_eq!(response.header("www-authenticate"), Some(MCP_CHALLENGE));
    }
    // Not even a JSON body is read.
    let mut request = http::Request::builder().method("POST").uri("/api/mcp").header("host", "svc.test");
    request =
        request.header("content-type", "application/json").header("accept", "application/json, text/event-stream");
    let response = app.send(request.body(axum::body::Body::from("not json at all")).unwrap()).await;
    assert_problem(&response, 401, "authentication_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn other_methods_get_405(pool: PgPool) {
    let app = TestApp::new(pool).await;
    for method in ["GET", "DELETE", "PUT"] {
        let request = http::Request::builder().method(method).uri("/api/mcp").header("host", "svc.test");
        let response = app.send(request.body(axum::body::Body::empty()).unwrap()).await;
        assert_problem(&response, 405, "invalid_request");
        assert_eq!(response.header("allow"), Some("POST"));
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn problems_after_authentication_are_tool_errors(pool: PgPool) {
    let app = TestApp::new(pool).await;
    // Signed but not set up: a tool error, so the agent learns the stable code.
    let token = app.issuer().token("newcomer");
    let (is_error, body) = envelope(&app.tool(&token, None, "svc_identity_status", json!({})).await);
    assert!(is_error);
    assert_eq!(body["error"]["code"], "setup_required");
    // An expired token is refused at the HTTP level.
    let mut claims = svc_tests::TestIssuer::claims("newcomer");
    claims["exp"] = (svc_tests::now_secs() - 3600).into();
    let expired = app.issuer().sign(svc_tests::Alg::Rs256, &claims);
    assert_problem(&app.tool(&expired, None, "svc_identity_status", json!({})).await, 401, "reauthentication_required");
    // An unknown tool is a JSON-RPC error.
    let user = app.user("alice").await;
    let response = app.tool(&user.token, None, "svc_nope", json!({})).await;
    assert_eq!(response.json()["error"]["code"], -32602);
}

#[sqlx::test(migrations = "../migrations")]
async fn mutations_over_mcp_use_idempotency_too(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let input = json!({ "name": "Helper", "idempotencyKey": "mcp-key-0001" });
    let (_, first) = envelope(&app.tool(&owner.token, None, "svc_agent_create", input.clone()).await);
    let (_, second) = envelope(&app.tool(&owner.token, None, "svc_agent_create", input).await);
    assert_eq!(first["data"], second["data"]);
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
    let http = app.op("agents/list", &owner.token, None, json!({})).await;
    assert_eq!(assert_ok("agents/list", &http)["agents"][0], first["data"]["agent"]);
}

#[sqlx::test(migrations = "../migrations")]
async fn oversized_requests_are_refused_before_they_are_read(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let name = "x".repeat(1024 * 1024 + 64 * 1024);
    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_agent_create", "arguments": { "name": name } } });
    let body = message.to_string();
    let request = http::Request::builder()
        .method("POST")
        .uri("/api/mcp")
        .header("host", "svc.test")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {}", user.token))
        .header("content-length", body.len().to_string())
        .body(axum::body::Body::from(body))
        .unwrap();
    let response = app.send(request).await;
    let problem = assert_problem(&response, 413, "invalid_request");
    assert_eq!(problem["error"]["details"]["reason"], "body_too_large");
    // Within the operation's 1 MiB: read, then refused by the schema like HTTP.
    let arguments = json!({ "name": "x".repeat(1000 * 1024) });
    let (is_error, body) = envelope(&app.tool(&user.token, None, "svc_agent_create", arguments).await);
    assert!(is_error);
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/name");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 0);
}

/// Sends `message` to the MCP endpoint with the usual headers, `headers`
/// replacing or adding to them.
async fn send(app: &TestApp, token: &str, message: &Value, headers: &[(&str, &str)]) -> svc_tests::http::TestResponse {
    let auth = format!("Bearer {token}");
    let mut all = vec![
        ("host", "svc.test"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    for (name, _) in headers {
        all.retain(|(n, _)| n != name);
    }
    all.extend_from_slice(headers);
    let mut request = http::Request::builder().method("POST").uri("/api/mcp");
    for (name, value) in all {
        request = request.header(name, value);
    }
    app.send(request.body(axum::body::Body::from(message.to_string())).unwrap()).await
}

/// A response as it can be compared with another one's: status, media type
/// and body, the request id (which differs per request) replaced.
fn comparable(response: &svc_tests::http::TestResponse) -> (u16, Option<String>, Value) {
    let request_id = response.header("x-request-id").expect("a request id");
    let body = response.text().replace(request_id, "req_same");
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (response.status, response.header("content-type").map(str::to_owned), body)
}

/// rmcp's own header check: it takes a quality value, which the fast path
/// leaves to rmcp.
const RMCP_ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream;q=0.9");

/// The tool calls the gate answers itself get the JSON rmcp's service gives
/// for the same message: results, problems, JSON-RPC errors, ids of both kinds.
#[sqlx::test(migrations = "../migrations")]
async fn the_fast_path_answers_as_rmcp_does(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let agent = app.agent(&owner, &ws, "Helper").await;
    let (mallory, _) = app.owner("mallory").await;
    let newcomer = app.issuer().token("newcomer");
    let call =
        |id: Value, params: Value| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
    let inspect = json!({ "name": "svc_agent_inspect", "arguments": { "agentId": agent } });
    let cases = [
        (&owner.token, call(json!(1), inspect.clone())),
        (&owner.token, call(json!("call-7"), inspect.clone())),
        (&owner.token, call(json!(-42), inspect.clone())),
        (&owner.token, call(json!(3), json!({ "name": "svc_agent_list" }))),
        (
            &owner.token,
            call(json!(4), json!({ "name": "svc_agent_list", "arguments": {}, "_meta": { "progressToken": "p" } })),
        ),
        (&mallory.token, call(json!(5), inspect.clone())),
        (&newcomer, call(json!(6), inspect.clone())),
        (&owner.token, call(json!(7), json!({ "name": "svc_agent_create", "arguments": { "name": "x".repeat(121) } }))),
        (&owner.token, call(json!(8), json!({ "name": "svc_nope", "arguments": {} }))),
        (&owner.token, call(json!("nine"), json!({ "name": "svc_agent_list", "arguments": [1] }))),
        (&owner.token, call(json!(10), json!({ "name": 5 }))),
        (&owner.token, json!({ "jsonrpc": "2.0", "id": 11, "method": "tools/call" })),
    ];
    for (token, message) in &cases {
        let fast = send(&app, token, message, &[]).await;
        let rmcp = send(&app, token, message, &[RMCP_ACCEPT]).await;
        assert_eq!(comparable(&fast), comparable(&rmcp), "{message}");
    }
    // The first is what an agent.inspect over HTTP answers.
    let (is_error, structured) = envelope(&send(&app, &owner.token, &cases[0].1, &[]).await);
    assert!(!is_error);
    let http = app.op("agents/inspect", &owner.token, None, json!({ "agentId": agent })).await;
    assert_eq!(without_request_id(structured), without_request_id(http.json()));
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
}

/// A request the fast path leaves to rmcp gets rmcp's answer: a refusal of its
/// headers, or the tool's result.
#[sqlx::test(migrations = "../migrations")]
async fn requests_the_fast_path_leaves_get_rmcps_answer(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let agent = app.agent(&owner, &ws, "Helper").await;
    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_agent_inspect", "arguments": { "agentId": agent } } });
    let fast = comparable(&send(&app, &owner.token, &message, &[]).await);
    assert_eq!(fast.0, 200);
    // The call runs, on rmcp's path (a quality value, an Origin, `Mcp-*`
    // headers) or on the fast path (a settled version, another allowed host),
    // with the same answer.
    for header in [
        RMCP_ACCEPT,
        ("origin", "https://a.example"),
        ("mcp-method", "tools/call"),
        ("mcp-session-id", "none"),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-protocol-version", "2025-11-25"),
        ("host", "127.0.0.1:8080"),
    ] {
        assert_eq!(comparable(&send(&app, &owner.token, &message, &[header]).await), fast, "{header:?}");
    }
    // rmcp refuses at the HTTP level: the error envelope.
    for (header, status, text) in [
        (("mcp-protocol-version", "1999-01-01"), 400, "Unsupported MCP-Protocol-Version: 1999-01-01"),
        (("host", "evil.example"), 403, "Host header is not allowed"),
        (("accept", "*/*"), 406, "Not Acceptable"),
        (("accept", "application/json;q=0, text/event-stream"), 406, "Not Acceptable"),
    ] {
        let response = send(&app, &owner.token, &message, &[header]).await;
        let body = assert_problem(&response, status, "invalid_request");
        assert!(body["error"]["message"].as_str().unwrap().contains(text), "{header:?}: {body}");
    }
    // rmcp refuses with a JSON-RPC error: 2026-07-28 wants SEP-2243 headers and
    // per-request `_meta`, and a `_meta` version wants the header too.
    let mut versioned = message.clone();
    versioned["params"]["_meta"] = json!({ "io.modelcontextprotocol/protocolVersion": "2025-06-18" });
    for (message, header) in [(&message, Some(("mcp-protocol-version", "2026-07-28"))), (&versioned, None)] {
        let response = send(&app, &owner.token, message, header.as_slice()).await;
        assert_eq!(response.status, 400, "{}", response.text());
        let body = response.json();
        assert_eq!(body["error"]["code"], -32020, "{body}");
        assert_eq!(body["id"], 1);
        assert_eq!(body["error"]["data"]["requestId"], response.header("x-request-id").unwrap());
    }
}

/// A tool call the gate answers itself is not cut short when shutdown starts:
/// it finishes within the grace period, as over HTTP. (rmcp's service answers
/// 500 at once while its handler runs on; see `docs/decisions.md`.)
#[sqlx::test(migrations = "../migrations")]
async fn a_tool_call_in_flight_at_shutdown_finishes(pool: PgPool) {
    use tower::ServiceExt;
    let app = TestApp::new(pool.clone()).await;
    let (owner, ws) = app.owner("alice").await;
    let agent = app.agent(&owner, &ws, "Helper").await;
    let config = crate::helpers::config();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let router = svc_api::router(svc_api::AppState::new(pool.clone(), &config).unwrap(), &config, shutdown.clone());
    // A mutation re-reads its Workspace under FOR SHARE: held here, it waits.
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE workspaces IN EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_agent_configure", "arguments": { "agentId": agent, "temperature": 0.5 } } });
    let request = http::Request::builder()
        .method("POST")
        .uri("/api/mcp")
        .header("host", "svc.test")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {}", owner.token))
        .header("svc-workspace", ws.as_str())
        .body(axum::body::Body::from(message.to_string()))
        .unwrap();
    let call = tokio::spawn(router.oneshot(request));
    assert!(waits_on_a_lock(&pool, "%FOR SHARE%").await, "the call never waited for the Workspace");
    // Shutdown starts while the call waits: its statement can only end after
    // the rollback below, so a call that shutdown cut short would be answered
    // first (500, as rmcp's service answers).
    shutdown.cancel();
    lock.rollback().await.unwrap();
    let response = call.await.unwrap().unwrap();
    let (parts, body) = response.into_parts();
    let body = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes();
    let response = svc_tests::http::TestResponse { status: parts.status.as_u16(), headers: parts.headers, body };
    let (is_error, structured) = envelope(&response);
    assert!(!is_error, "{structured}");
    assert_eq!(structured["data"]["agent"]["configuration"]["temperature"], 0.5);
}
