//! End to end: the real `svc-api` and `svc-worker` binaries against PostgreSQL,
//! with User tokens signed by a test issuer whose keys are a JWKS file.

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::http::HttpClient;
use svc_tests::process::{Spawned, run};
use svc_tests::raw::RawConn;
use svc_tests::{AUDIENCE, ISSUER, TestIssuer};

/// The URL of the test's own database (created by `#[sqlx::test]`).
fn database_url(pool: &PgPool) -> String {
    let options = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().expect("a database name")
    )
}

/// Runs an operator command and returns the one JSON object it printed.
async fn admin(database: &str, args: &[&str]) -> Value {
    let mut full = vec!["admin"];
    full.extend_from_slice(args);
    let (status, stdout, stderr) = run("svc-api", &full, &[("DATABASE_URL", database)]).await;
    assert!(status.success(), "svc-api {args:?} failed: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object: {stdout}");
    serde_json::from_str(lines[0]).expect("JSON on stdout")
}

/// Calls `call` until `code` answers, within the second an API process may
/// keep using a caller after an operator command changed it (its caller cache
/// hears the change from PostgreSQL; README "Configuration"); returns that
/// answer.
async fn within_a_second<F, Fut>(code: &str, call: F) -> svc_tests::http::TestResponse
where
    F: Fn() -> Fut,
    Fut: Future<Output = svc_tests::http::TestResponse>,
{
    let started = std::time::Instant::now();
    loop {
        let response = call().await;
        if response.json()["error"]["code"] == code {
            return response;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "still {}", response.text());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Starts `svc-api serve` on a free port with the test issuer's JWKS file.
async fn serve(database: &str) -> (Spawned, String) {
    let jwks = TestIssuer::shared().jwks_path().to_str().expect("a UTF-8 path").to_owned();
    serve_with(database, &[("SVC_OIDC_ISSUER", ISSUER), ("SVC_OIDC_JWKS_FILE", jwks.as_str())]).await
}

/// Starts `svc-api serve` on a free port; returns it and its base URL.
async fn serve_with(database: &str, oidc: &[(&str, &str)]) -> (Spawned, String) {
    let mut envs = vec![
        ("DATABASE_URL", database),
        ("SVC_BIND", "127.0.0.1:0"),
        ("SVC_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
        ("SVC_OIDC_AUDIENCE", AUDIENCE),
    ];
    envs.extend_from_slice(oidc);
    let mut api = Spawned::start("svc-api", &["serve"], &envs);
    let line = api.wait_for("svc-api listening").await;
    let log: Value = serde_json::from_str(&line).expect("a JSON log line");
    let addr = log["fields"]["addr"].as_str().expect("the bound address").to_owned();
    (api, format!("http://{addr}"))
}

#[sqlx::test(migrations = false)]
async fn the_api_binary_serves_users_over_http_and_mcp(pool: PgPool) {
    let database = database_url(&pool);
    let (status, stdout, stderr) = run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await;
    assert!(status.success(), "{stderr}");
    assert_eq!(serde_json::from_str::<Value>(stdout.trim()).unwrap()["migrated"], true);
    let user = admin(
        &database,
        &["user-setup", "--issuer", ISSUER, "--subject", "e2e-alice", "--email", "alice@example.test"],
    )
    .await;
    assert_eq!(user["user"]["setupCompleted"], true);

    let (mut api, base) = serve(&database).await;
    let client = HttpClient::new(&base);
    let ready = client.get("/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    let token = TestIssuer::shared().token("e2e-alice");

    let created = client
        .post_json("/api/public/operations/workspaces/create", Some(&token), None, &json!({ "name": "E2E" }))
        .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let ws = created.json()["data"]["workspace"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.header("x-request-id"), created.json()["meta"]["requestId"].as_str());

    let agent = client
        .post_json("/api/public/operations/agents/create", Some(&token), Some(&ws), &json!({ "name": "Bot" }))
        .await;
    assert_eq!(agent.status, 200, "{}", agent.text());
    assert_eq!(agent.json()["data"]["agent"]["configuration"]["temperature"], 0.2);

    // Operator commands act on the same database the server reads.
    let plan = admin(&database, &["plan-set", "--workspace", &ws, "--plan", "expired"]).await;
    assert_eq!(plan["active"], false);
    let empty = json!({});
    let refused = within_a_second("entitlement_required", || {
        client.post_json("/api/public/operations/agents/list", Some(&token), Some(&ws), &empty)
    })
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["error"]["code"], "entitlement_required");

    // MCP: stateless, straight to tools/call.
    let rpc = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "svc_identity_status", "arguments": {} } });
    let auth = format!("Bearer {token}");
    let mcp = client
        .send(
            hyper::Method::POST,
            "/api/mcp",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
            rpc.to_string(),
        )
        .await;
    assert_eq!(mcp.status, 200, "{}", mcp.text());
    let result = &mcp.json()["result"];
    assert_eq!(result["structuredContent"]["data"]["status"], "ready");
    assert_eq!(result["structuredContent"]["data"]["workspace"]["id"], ws);
    let get = client.get("/api/mcp").await;
    assert_eq!(get.status, 405);

    let status = api.terminate().await;
    assert!(status.success(), "clean exit after SIGTERM: {status}\n{}", api.logs());
    assert!(api.logs().contains("shutting down"));
    assert!(!api.logs().contains(&token), "tokens are never logged");
}

#[sqlx::test(migrations = false)]
async fn operator_commands_print_json_and_fail_loudly(pool: PgPool) {
    let database = database_url(&pool);
    assert!(run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await.0.success());
    admin(
        &database,
        &["user-setup", "--issuer", ISSUER, "--subject", "owner", "--email", "o@example.test", "--name", "Owner"],
    )
    .await;
    admin(&database, &["user-setup", "--issuer", ISSUER, "--subject", "helper", "--email", "h@example.test"]).await;

    let (mut api, base) = serve(&database).await;
    let client = HttpClient::new(&base);
    let token = TestIssuer::shared().token("owner");
    let created = client
        .post_json(
            "/api/public/operations/workspaces/create",
            Some(&token),
            None,
            &json!({ "name": "Ops", "slug": "ops" }),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.text());

    let member = admin(
        &database,
        &["member-add", "--workspace", "ops", "--issuer", ISSUER, "--subject", "helper", "--role", "admin"],
    )
    .await;
    assert_eq!(member["role"], "admin");
    let archived = admin(&database, &["workspace-archive", "--workspace", "ops"]).await;
    assert_eq!(archived["workspace"]["status"], "archived");
    let rename =
        client.post_json("/api/public/operations/workspaces/rename", Some(&token), None, &json!({ "name": "X" })).await;
    assert_eq!(rename.json()["error"]["code"], "workspace_archived");
    let unarchived = admin(&database, &["workspace-unarchive", "--workspace", "ops"]).await;
    assert_eq!(unarchived["workspace"]["status"], "active");
    let plan = admin(
        &database,
        &["plan-set", "--workspace", "ops", "--plan", "starter", "--limit", "agents=1", "--limit", "api_keys=2"],
    )
    .await;
    assert_eq!((plan["status"].as_str(), plan["limits"]["agents"].as_i64()), (Some("active"), Some(1)));
    let revoked = admin(&database, &["user-revoke-sessions", "--issuer", ISSUER, "--subject", "owner"]).await;
    assert!(revoked["user"]["sessionsRevokedAt"].is_i64());
    let empty = json!({});
    within_a_second("reauthentication_required", || {
        client.post_json("/api/public/operations/identity/status", Some(&token), None, &empty)
    })
    .await;

    for bad in [
        &["plan-set", "--workspace", "ops", "--plan", "platinum"][..],
        &["plan-set", "--workspace", "nope", "--plan", "pro"],
        &["plan-set", "--workspace", "ops", "--plan", "pro", "--limit", "robots=3"],
        &["member-add", "--workspace", "ops", "--issuer", ISSUER, "--subject", "nobody", "--role", "member"],
        &["member-add", "--workspace", "ops", "--issuer", ISSUER, "--subject", "helper", "--role", "king"],
        &["user-revoke-sessions", "--issuer", ISSUER, "--subject", "nobody"],
        &["user-setup", "--issuer", ISSUER, "--subject", "x", "--email", "not-an-email"],
    ] {
        let mut args = vec!["admin"];
        args.extend_from_slice(bad);
        let (status, stdout, stderr) = run("svc-api", &args, &[("DATABASE_URL", &database)]).await;
        assert!(!status.success(), "{bad:?} should fail");
        assert!(stdout.is_empty(), "nothing on stdout for {bad:?}: {stdout}");
        assert!(!stderr.trim().is_empty(), "a message for {bad:?}");
    }
    // A database that refuses the connection: its error, said once.
    let nobody = database.replacen("postgres://postgres@", "postgres://svc_no_such_role@", 1);
    assert_ne!(nobody, database);
    let (status, _, stderr) =
        run("svc-api", &["admin", "plan-set", "--workspace", "ops", "--plan", "pro"], &[("DATABASE_URL", &nobody)])
            .await;
    assert!(!status.success());
    assert_eq!(stderr.matches("role \"svc_no_such_role\" does not exist").count(), 1, "{stderr}");
    assert!(api.terminate().await.success());
}

#[sqlx::test(migrations = false)]
async fn the_worker_starts_and_stops_cleanly(pool: PgPool) {
    let database = database_url(&pool);
    assert!(run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await.0.success());
    let namespace = svc_tests::stack::namespace();
    let mut worker = svc_tests::stack::Worker::start(&database, "redis://127.0.0.1:6379", &namespace, &[]).await;
    let status = worker.process.terminate().await;
    assert!(status.success(), "{status}\n{}", worker.process.logs());
    assert!(worker.process.logs().contains("svc-worker stopped"));
}

#[sqlx::test(migrations = false)]
async fn the_api_finds_keys_by_oidc_discovery(pool: PgPool) {
    let database = database_url(&pool);
    assert!(run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await.0.success());
    let provider = svc_tests::provider::serve(TestIssuer::shared().jwks()).await;
    let issuer = provider.issuer.clone();
    admin(&database, &["user-setup", "--issuer", &issuer, "--subject", "disco", "--email", "d@example.test"]).await;
    let (mut api, base) = serve_with(&database, &[("SVC_OIDC_ISSUER", issuer.as_str())]).await;
    let mut claims = TestIssuer::claims("disco");
    claims["iss"] = issuer.clone().into();
    let token = TestIssuer::shared().sign(svc_tests::Alg::Es256, &claims);
    let client = HttpClient::new(&base);
    let status = client.post_json("/api/public/operations/identity/status", Some(&token), None, &json!({})).await;
    assert_eq!(status.status, 200, "{}", status.text());
    assert_eq!(status.json()["data"]["user"]["email"], "d@example.test");
    assert!(provider.requests().contains(&"/.well-known/openid-configuration".to_owned()));
    assert!(provider.requests().contains(&"/jwks.json".to_owned()));
    assert!(api.terminate().await.success());
}

/// Create, use, rotate and revoke a Workspace API key over HTTP and MCP against
/// the real binary logging at `trace` (rmcp's own targets included): no secret
/// (nor the User's token) appears in its logs, and the revoked key is refused on
/// both surfaces.
#[sqlx::test(migrations = false)]
async fn api_key_secrets_never_reach_the_logs(pool: PgPool) {
    let database = database_url(&pool);
    assert!(run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await.0.success());
    admin(&database, &["user-setup", "--issuer", ISSUER, "--subject", "keeper", "--email", "k@example.test"]).await;
    let jwks = TestIssuer::shared().jwks_path().to_str().expect("a UTF-8 path").to_owned();
    let mut api = Spawned::start(
        "svc-api",
        &["serve"],
        &[
            ("DATABASE_URL", database.as_str()),
            ("SVC_BIND", "127.0.0.1:0"),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "trace,rmcp=trace,rmcp::service=trace,rmcp::transport=trace"),
            ("SVC_OIDC_ISSUER", ISSUER),
            ("SVC_OIDC_AUDIENCE", AUDIENCE),
            ("SVC_OIDC_JWKS_FILE", jwks.as_str()),
        ],
    );
    let line = api.wait_for("svc-api listening").await;
    let addr = serde_json::from_str::<Value>(&line).expect("JSON")["fields"]["addr"].as_str().expect("addr").to_owned();
    let client = HttpClient::new(format!("http://{addr}"));
    let token = TestIssuer::shared().token("keeper");
    let op = |path: &'static str, credential: String, body: Value| {
        let client = client.clone();
        async move { client.post_json(&format!("/api/public/operations/{path}"), Some(&credential), None, &body).await }
    };
    let mcp = |credential: String, tool: &'static str, arguments: Value| {
        let client = client.clone();
        async move {
            let auth = format!("Bearer {credential}");
            let rpc = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": tool, "arguments": arguments } });
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ];
            client.send(hyper::Method::POST, "/api/mcp", &headers, rpc.to_string()).await
        }
    };
    assert_eq!(op("workspaces/create", token.clone(), json!({ "name": "Keys" })).await.status, 200);

    // Create over HTTP and over MCP.
    let created = op("api-keys/create", token.clone(), json!({ "name": "ci", "preset": "operator" })).await;
    assert_eq!(created.status, 200, "{}", created.text());
    let first = created.json()["data"]["secret"].as_str().expect("a secret").to_owned();
    let first_id = created.json()["data"]["apiKey"]["id"].as_str().expect("an id").to_owned();
    let over_mcp = mcp(token.clone(), "svc_api_key_create", json!({ "name": "agent", "preset": "read_only" })).await;
    let second =
        over_mcp.json()["result"]["structuredContent"]["data"]["secret"].as_str().expect("a secret").to_owned();

    // Use both.
    assert_eq!(op("agents/list", first.clone(), json!({})).await.status, 200);
    assert_eq!(mcp(second.clone(), "svc_identity_status", json!({})).await.status, 200);

    // Rotate, then revoke the original.
    let rotated = op("api-keys/rotate", token.clone(), json!({ "apiKeyId": first_id })).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    let third = rotated.json()["data"]["secret"].as_str().expect("a secret").to_owned();
    assert_eq!(op("agents/list", third.clone(), json!({})).await.status, 200);
    let revoked = op("api-keys/revoke", token.clone(), json!({ "apiKeyId": first_id, "confirm": true })).await;
    assert_eq!(revoked.status, 200, "{}", revoked.text());

    // The revoked key is refused on both surfaces.
    let http = op("agents/list", first.clone(), json!({})).await;
    assert_eq!((http.status, http.json()["error"]["details"]["reason"].as_str()), (401, Some("api_key_revoked")));
    let over_mcp = mcp(first.clone(), "svc_identity_status", json!({})).await;
    assert_eq!(
        (over_mcp.status, over_mcp.json()["error"]["details"]["reason"].as_str()),
        (401, Some("api_key_revoked"))
    );
    let metrics = client.get("/metrics").await.text();

    assert!(api.terminate().await.success());
    let logs = api.logs();
    assert!(logs.lines().count() > 50, "trace logging was on");
    for secret in [&first, &second, &third, &token] {
        assert!(!logs.contains(secret.as_str()), "a credential reached the logs");
        // Nor its random part alone.
        assert!(!logs.contains(&secret[secret.len() - 20..]), "part of a credential reached the logs");
        assert!(!metrics.contains(secret.as_str()));
    }
}

/// Neither a half-sent head nor an idle keep-alive connection holds shutdown:
/// with a 60 s grace period the API exits as soon as its requests are done.
#[sqlx::test(migrations = false)]
async fn shutdown_does_not_wait_for_idle_or_stalled_connections(pool: PgPool) {
    let database = database_url(&pool);
    let (status, _, stderr) = run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await;
    assert!(status.success(), "{stderr}");
    let mut api = Spawned::start(
        "svc-api",
        &["serve"],
        &[
            ("DATABASE_URL", &database),
            ("SVC_BIND", "127.0.0.1:0"),
            ("SVC_LOG_FORMAT", "json"),
            ("SVC_SHUTDOWN_GRACE_SECS", "60"),
            ("SVC_HEADER_READ_TIMEOUT_SECS", "120"),
        ],
    );
    let line = api.wait_for("svc-api listening").await;
    let log: Value = serde_json::from_str(&line).expect("a JSON log line");
    let addr: std::net::SocketAddr = log["fields"]["addr"].as_str().unwrap().parse().unwrap();
    let mut idle = RawConn::connect(addr).await;
    idle.send(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(idle.response().await.unwrap().status, 200);
    let mut stalled = RawConn::connect(addr).await;
    stalled.send(b"POST /api/public/operations/identity/status HTTP/1.1\r\nhost: x\r\n").await;
    let started = std::time::Instant::now();
    let status = api.terminate().await;
    let took = started.elapsed();
    assert!(status.success(), "{}", api.logs());
    assert!(took < std::time::Duration::from_secs(20), "shutdown took {took:?} of a 60 s grace period");
    assert!(idle.closed().await && stalled.closed().await);
}

/// Runs `svc-api serve` and `svc-worker` with the embedding model in `dir`:
/// both must stop at start; returns what each wrote on stderr.
async fn refused_with_model(database: &str, dir: &std::path::Path) -> [String; 2] {
    let dir = dir.to_str().expect("a UTF-8 path");
    let namespace = svc_tests::stack::namespace();
    let envs = [
        ("DATABASE_URL", database),
        ("SVC_EMBEDDINGS_MODEL_DIR", dir),
        ("SVC_BIND", "127.0.0.1:0"),
        ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
        ("SVC_QUEUE_NAMESPACE", namespace.as_str()),
    ];
    let mut said = Vec::new();
    for (binary, args) in [("svc-api", &["serve"][..]), ("svc-worker", &[][..])] {
        let ran = tokio::time::timeout(std::time::Duration::from_secs(60), run(binary, args, &envs)).await;
        let (status, _, stderr) = ran.unwrap_or_else(|_| panic!("{binary} started without its model"));
        assert!(!status.success(), "{binary} started without its model");
        said.push(stderr);
    }
    [said.remove(0), said.remove(0)]
}

/// A missing, truncated or altered model file stops both binaries at start,
/// naming the file and the command that fetches it.
#[sqlx::test(migrations = false)]
async fn without_its_model_neither_binary_starts(pool: PgPool) {
    let database = database_url(&pool);
    assert!(run("svc-api", &["migrate"], &[("DATABASE_URL", &database)]).await.0.success());
    let temp = svc_tests::TempDir::new("svc-model");
    let dir = temp.path();
    let model = dir.join("model.safetensors");
    for stderr in refused_with_model(&database, dir).await {
        assert!(stderr.contains(&format!("{}: missing; run scripts/fetch-model", model.display())), "{stderr}");
    }
    let fetched = svc_tests::model_dir();
    std::fs::copy(fetched.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let bytes = std::fs::read(fetched.join("model.safetensors")).unwrap();
    // Cut short, as an interrupted copy.
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    for stderr in refused_with_model(&database, dir).await {
        assert!(stderr.contains(&format!("{}: truncated", model.display())), "{stderr}");
        assert!(stderr.contains("run scripts/fetch-model"), "{stderr}");
    }
    // Whole, but one weight altered.
    let mut altered = bytes.clone();
    let last = altered.len() - 1;
    altered[last] ^= 0x01;
    std::fs::write(&model, &altered).unwrap();
    for stderr in refused_with_model(&database, dir).await {
        assert!(stderr.contains(&format!("{}: SHA-256", model.display())), "{stderr}");
        assert!(stderr.contains("is not the pinned"), "{stderr}");
    }
    // The model itself: both start (the worker's start is tested elsewhere).
    std::fs::write(&model, &bytes).unwrap();
    let (mut api, _) = serve_with(&database, &[("SVC_EMBEDDINGS_MODEL_DIR", dir.to_str().unwrap())]).await;
    assert!(api.terminate().await.success());
}
