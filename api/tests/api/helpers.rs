//! `TestApp`: the API's router over a fresh database per test, called in-process.

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use secrecy::SecretString;
use serde_json::{Value, json};
use sqlx::PgPool;
use svc_api::config::{DatabaseArgs, ServeConfig};
use svc_api::{AppState, router};
use svc_tests::http::TestResponse;
use svc_tests::{AUDIENCE, ISSUER, TestIssuer};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub const BASE_URL: &str = "http://svc.test";

/// The test's database is dropped even if the test fails.
fn forget_on_failure(pool: &PgPool) {
    if let Some(name) = pool.connect_options().get_database() {
        svc_tests::cleanup::drop_on_failure(name);
    }
}

pub fn config() -> ServeConfig {
    ServeConfig {
        database: DatabaseArgs {
            database_url: SecretString::from("postgres://unused"),
            // As deployed: the gate gets its default places. (The pool the
            // tests pass in is sqlx's test pool, of 5 connections.)
            database_max_connections: svc_api::config::DEFAULT_MAX_CONNECTIONS,
            ..DatabaseArgs::default()
        },
        bind: "127.0.0.1:0".parse().expect("an address"),
        public_base_url: Some(BASE_URL.to_owned()),
        oidc_issuer: Some(ISSUER.to_owned()),
        oidc_audience: Some(AUDIENCE.to_owned()),
        oidc_jwks_file: Some(TestIssuer::shared().jwks_path().to_owned()),
        oidc_client_id: Some("svc-cli".to_owned()),
        oidc_scopes: vec!["openid".to_owned()],
        shutdown_grace_secs: 1,
        // Every wait reads PostgreSQL, so a test sees at once what it changed
        // out of band; the cache of wait's answers has tests of its own.
        wait_cache_entries: 0,
        // Likewise every request authenticates from PostgreSQL; the cache of
        // callers has tests of its own (`callers.rs`).
        caller_cache_entries: 0,
        // Each test's jobs under keys of its own.
        queue_namespace: format!("svctest_{}", uuid::Uuid::now_v7().simple()),
        // Questions by their words alone, so ranking tests pin BM25F exactly;
        // retrieval by meaning has tests of its own (`meaning.rs`).
        embeddings: svc_core::embeddings::EmbeddingsArgs {
            switch: svc_core::embeddings::Switch::Off,
            ..Default::default()
        },
        ..ServeConfig::default()
    }
}

/// The real connection loop (`svc_api::app::serve`) over a fresh router, on a
/// free port, for tests that speak raw HTTP.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(pool: PgPool, config: ServeConfig) -> Self {
        forget_on_failure(&pool);
        let state = AppState::new(pool, &config).expect("app state");
        let shutdown = CancellationToken::new();
        let router = router(state, &config, shutdown.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr = listener.local_addr().expect("an address");
        let serving = svc_api::app::Serving {
            header_timeout: std::time::Duration::from_secs(config.header_read_timeout_secs),
            grace: std::time::Duration::from_secs(config.shutdown_grace_secs),
            shutdown,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(svc_api::app::serve(listener, router, serving, async {
            let _ = stopped.await;
        }));
        Self { addr, stop: Some(stop), task }
    }

    /// Stops accepting and waits until every connection is closed (or the
    /// grace period is over).
    pub async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

#[derive(Clone)]
pub struct TestApp {
    router: Router,
    pub pool: PgPool,
}

/// A signed-up User with an access token.
#[derive(Clone, Debug)]
pub struct TestUser {
    pub token: String,
}

impl TestApp {
    pub async fn new(pool: PgPool) -> Self {
        Self::with_config(pool, config()).await
    }

    pub async fn with_config(pool: PgPool, config: ServeConfig) -> Self {
        forget_on_failure(&pool);
        let state = AppState::new(pool.clone(), &config).expect("app state");
        Self { router: router(state, &config, CancellationToken::new()), pool }
    }

    pub fn issuer(&self) -> &'static TestIssuer {
        TestIssuer::shared()
    }

    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.expect("the router answers");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("a readable body").to_bytes();
        TestResponse { status: parts.status.as_u16(), headers: parts.headers, body }
    }

    /// A figure of `/metrics` (the first series named `series`, labels
    /// included); 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let request = Request::builder().uri("/metrics").body(Body::empty()).expect("a request");
        let text = self.send(request).await.text();
        let line = text.lines().find(|line| line.split(' ').next() == Some(series));
        line.and_then(|line| line.rsplit(' ').next()).map_or(0.0, |value| value.parse().expect("a number"))
    }

    /// POSTs raw bytes to an operation path.
    pub async fn post_raw(&self, path: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> TestResponse {
        let mut request = Request::builder().method("POST").uri(format!("/api/public/operations/{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(body.into()).expect("a request")).await
    }

    /// Calls an operation over HTTP.
    pub async fn op(&self, path: &str, token: &str, workspace: Option<&str>, input: Value) -> TestResponse {
        let auth = format!("Bearer {token}");
        let mut headers = vec![("authorization", auth.as_str()), ("content-type", "application/json")];
        if let Some(ws) = workspace {
            headers.push(("svc-workspace", ws));
        }
        self.post_raw(path, &headers, input.to_string()).await
    }

    /// Calls an operation as `user`, with no Workspace header.
    pub async fn as_user(&self, user: &TestUser, path: &str, input: Value) -> TestResponse {
        self.op(path, &user.token, None, input).await
    }

    /// Sends one JSON-RPC message to the MCP endpoint.
    pub async fn mcp(&self, token: Option<&str>, workspace: Option<&str>, message: Value) -> TestResponse {
        let mut request = Request::builder()
            .method("POST")
            .uri("/api/mcp")
            .header("host", "svc.test")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(ws) = workspace {
            request = request.header("svc-workspace", ws);
        }
        self.send(request.body(Body::from(message.to_string())).expect("a request")).await
    }

    /// Calls a tool over MCP; returns the HTTP response (the JSON-RPC result inside).
    pub async fn tool(&self, token: &str, workspace: Option<&str>, name: &str, arguments: Value) -> TestResponse {
        let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": name, "arguments": arguments } });
        self.mcp(Some(token), workspace, message).await
    }

    /// Signs a User up (operator command) and returns them with a token.
    pub async fn user(&self, subject: &str) -> TestUser {
        svc_core::admin::user_setup(&self.pool, ISSUER, subject, &format!("{subject}@example.test"), Some(subject))
            .await
            .expect("user setup");
        TestUser { token: self.issuer().token(subject) }
    }

    /// Creates a Workspace owned by `user`; returns its id.
    pub async fn workspace(&self, user: &TestUser, name: &str) -> String {
        let response = self.op("workspaces/create", &user.token, None, json!({ "name": name })).await;
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()["data"]["workspace"]["id"].as_str().expect("an id").to_owned()
    }

    /// A User with one Workspace of their own.
    pub async fn owner(&self, subject: &str) -> (TestUser, String) {
        let user = self.user(subject).await;
        let ws = self.workspace(&user, &format!("{subject} workspace")).await;
        (user, ws)
    }

    /// Creates an Agent; returns its id.
    pub async fn agent(&self, user: &TestUser, workspace: &str, name: &str) -> String {
        let response = self.op("agents/create", &user.token, Some(workspace), json!({ "name": name })).await;
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()["data"]["agent"]["id"].as_str().expect("an id").to_owned()
    }

    /// Creates a Workspace API key with the given input (`preset` or `scopes`);
    /// returns its id and secret.
    pub async fn api_key(&self, admin: &TestUser, workspace: &str, input: Value) -> (String, String) {
        let mut input = input;
        input["name"] = input.get("name").cloned().unwrap_or_else(|| json!("test key"));
        let response = self.op("api-keys/create", &admin.token, Some(workspace), input).await;
        let data = assert_ok("api-keys/create", &response);
        (
            data["apiKey"]["id"].as_str().expect("an id").to_owned(),
            data["secret"].as_str().expect("a secret").to_owned(),
        )
    }

    /// Runs `n` calls at once (each on its own task) and returns their responses.
    pub async fn concurrently<F, Fut>(&self, n: usize, call: F) -> Vec<TestResponse>
    where
        F: Fn(TestApp, usize) -> Fut,
        Fut: Future<Output = TestResponse> + Send + 'static,
    {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..n {
            tasks.spawn(call(self.clone(), i));
        }
        tasks.join_all().await
    }

    /// A count from this test's database.
    pub async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql).fetch_one(&self.pool).await.expect("a count")
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options().should_validate_formats(true).build(schema).expect("a valid schema")
}

fn assert_matches_schema(schema: &Value, body: &Value, what: &str) {
    let errors: Vec<String> =
        validator(schema).iter_errors(body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match its schema: {errors:#?}\n{body:#}");
}

fn assert_request_id(response: &TestResponse, body: &Value) {
    let request_id = body["meta"]["requestId"].as_str().expect("meta.requestId");
    assert!(request_id.starts_with("req_"), "{request_id}");
    assert_eq!(response.header("x-request-id"), Some(request_id));
}

/// Every stored passage with its words as PostgreSQL's text search reads
/// them (`search`: the revision's title weighted `A`, then heading and body,
/// in the passage's language), computed here from the text: the oracle the
/// index is checked against. Passages store an empty tsvector (migration 0025).
/// A subquery to select from.
pub const PASSAGES_WITH_WORDS: &str = "(SELECT p.source_id, p.revision_id, p.ordinal, p.agent_id, p.tokens,
        setweight(to_tsvector(c.config, r.title), 'A') || to_tsvector(c.config, coalesce(p.heading || E'\\n', '') || p.body)
            AS search
    FROM knowledge_passages p
    JOIN knowledge_revisions r ON r.id = p.revision_id
    CROSS JOIN LATERAL (SELECT (CASE p.language WHEN 'en' THEN 'english' WHEN 'es' THEN 'spanish' END)::regconfig
                        AS config) c)";

/// Sessions of the test's database waiting on a lock in a statement whose
/// text matches `pattern` (SQL `LIKE`).
pub async fn lock_waiters(pool: &PgPool, pattern: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1",
    )
    .bind(pattern)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits (up to about 5 s) until at least `count` [`lock_waiters`] match
/// `pattern`; whether they did.
pub async fn lock_waiters_reach(pool: &PgPool, pattern: &str, count: i64) -> bool {
    for _ in 0..500 {
        if lock_waiters(pool, pattern).await >= count {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// Waits (up to about 5 s) until a session waits on a lock in a statement
/// whose text matches `pattern`; whether one did.
pub async fn waits_on_a_lock(pool: &PgPool, pattern: &str) -> bool {
    lock_waiters_reach(pool, pattern, 1).await
}

/// Asserts a failure: status, code, the error body schema, and the request id in
/// body and header. Returns the body.
pub fn assert_problem(response: &TestResponse, status: u16, code: &str) -> Value {
    let body = response.json();
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(body["error"]["code"], code, "{}", response.text());
    assert_matches_schema(&svc_contract::openapi::error_body_schema(), &body, "the error body");
    assert_request_id(response, &body);
    body
}

/// Asserts the success of the operation at `path`: the whole envelope matches
/// the catalog's output schema (every field, no extra ones). Returns `data`.
pub fn assert_ok(path: &str, response: &TestResponse) -> Value {
    let body = response.json();
    assert_eq!(response.status, 200, "{}", response.text());
    let op = svc_contract::catalog::by_path(path).expect("a catalog path");
    assert_matches_schema(&Value::Object(op.output_schema().clone()), &body, op.id);
    assert_request_id(response, &body);
    body["data"].clone()
}

/// An owner ("alice") with a Workspace and an Agent ("Helper"), calling as the
/// owner in that Workspace: what most resource tests start from.
pub struct Tenant {
    pub app: TestApp,
    pub owner: TestUser,
    pub ws: String,
    pub agent: String,
}

impl Tenant {
    pub async fn new(pool: PgPool) -> Self {
        Self::with_config(pool, config()).await
    }

    pub async fn with_config(pool: PgPool, config: ServeConfig) -> Self {
        let app = TestApp::with_config(pool, config).await;
        let (owner, ws) = app.owner("alice").await;
        let agent = app.agent(&owner, &ws, "Helper").await;
        Self { app, owner, ws, agent }
    }

    pub async fn call(&self, path: &str, input: Value) -> TestResponse {
        self.app.op(path, &self.owner.token, Some(&self.ws), input).await
    }

    /// [`Tenant::call`] on a task of its own, for a call that waits on a lock
    /// the test holds: its answer comes from the handle.
    pub fn spawn_call(&self, path: &'static str, input: Value) -> tokio::task::JoinHandle<TestResponse> {
        let (app, token, ws) = (self.app.clone(), self.owner.token.clone(), self.ws.clone());
        tokio::spawn(async move { app.op(path, &token, Some(&ws), input).await })
    }

    /// [`Tenant::call`], which must succeed; its `data`.
    pub async fn ok(&self, path: &str, input: Value) -> Value {
        assert_ok(path, &self.call(path, input).await)
    }
}
