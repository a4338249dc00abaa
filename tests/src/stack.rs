//! The real processes of an end-to-end test: `svc-api` and `svc-worker` over a
//! test's own database, queue namespace and, where a test stops it, Redis.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use tokio::process::{Child, Command};

use crate::http::HttpClient;
use crate::process::{Spawned, run};
use crate::{AUDIENCE, ISSUER, TestIssuer};

/// The URL of a test's own database (created by `#[sqlx::test]`), which is
/// dropped even if the test fails (see [`crate::cleanup`]).
pub fn database_url(pool: &PgPool) -> String {
    let options = pool.connect_options();
    let name = options.get_database().expect("a database name");
    crate::cleanup::drop_on_failure(name);
    format!("postgres://{}@{}:{}/{name}", options.get_username(), options.get_host(), options.get_port())
}

/// Applies the migrations with `svc-api migrate`.
pub async fn migrate(database: &str) {
    let (status, _, stderr) = run("svc-api", &["migrate"], &[("DATABASE_URL", database)]).await;
    assert!(status.success(), "svc-api migrate failed: {stderr}");
}

/// Runs an operator command and returns the one JSON object it printed.
pub async fn admin(database: &str, args: &[&str]) -> Value {
    let mut full = vec!["admin"];
    full.extend_from_slice(args);
    let (status, stdout, stderr) = run("svc-api", &full, &[("DATABASE_URL", database)]).await;
    assert!(status.success(), "svc-api {args:?} failed: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object: {stdout}");
    serde_json::from_str(lines[0]).expect("JSON on stdout")
}

/// A queue namespace no other test uses.
pub fn namespace() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("svctest_{}_{nanos}", std::process::id())
}

/// A running `svc-api serve` on a free port.
pub struct Api {
    pub process: Spawned,
    pub base: String,
    pub client: HttpClient,
}

impl Api {
    /// Starts the API with the test issuer's keys, and `extra` settings.
    pub async fn start(database: &str, extra: &[(&str, &str)]) -> Self {
        let jwks = TestIssuer::shared().jwks_path().to_str().expect("a UTF-8 path").to_owned();
        let mut envs = vec![
            ("DATABASE_URL", database),
            ("SVC_BIND", "127.0.0.1:0"),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
            ("SVC_OIDC_ISSUER", ISSUER),
            ("SVC_OIDC_AUDIENCE", AUDIENCE),
            ("SVC_OIDC_JWKS_FILE", jwks.as_str()),
        ];
        envs.extend_from_slice(extra);
        let mut process = Spawned::start("svc-api", &["serve"], &envs);
        let line = process.wait_for("svc-api listening").await;
        let log: Value = serde_json::from_str(&line).expect("a JSON log line");
        let addr = log["fields"]["addr"].as_str().expect("the bound address").to_owned();
        let base = format!("http://{addr}");
        Self { process, client: HttpClient::new(&base), base }
    }

    /// Calls an operation; returns its HTTP status and body.
    pub async fn op(&self, path: &str, token: &str, workspace: Option<&str>, input: &Value) -> (u16, Value) {
        let response =
            self.client.post_json(&format!("/api/public/operations/{path}"), Some(token), workspace, input).await;
        (response.status, response.json())
    }
}

/// A running `svc-worker`.
pub struct Worker {
    pub process: Spawned,
    /// Where its `/healthz`, `/readyz` and `/metrics` are.
    pub metrics: SocketAddr,
}

impl Worker {
    /// Starts a worker with short sweeps, leases and re-sends (so tests of lost
    /// work finish in seconds), and `extra` settings.
    pub async fn start(database: &str, redis: &str, namespace: &str, extra: &[(&str, &str)]) -> Self {
        let mut envs = vec![
            ("DATABASE_URL", database),
            ("REDIS_URL", redis),
            ("SVC_QUEUE_NAMESPACE", namespace),
            ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
            ("SVC_SWEEP_INTERVAL_SECS", "1"),
            ("SVC_REQUEUE_AFTER_SECS", "2"),
            ("SVC_LEASE_SECS", "3"),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
        ];
        envs.extend_from_slice(extra);
        let mut process = Spawned::start("svc-worker", &[], &envs);
        let line = process.wait_for("svc-worker started").await;
        let log: Value = serde_json::from_str(&line).expect("a JSON log line");
        let metrics = log["fields"]["metrics"].as_str().and_then(|a| a.parse().ok()).expect("the metrics address");
        Self { process, metrics }
    }

    /// Kills the process with SIGKILL: nothing runs after.
    pub async fn kill(&mut self) {
        self.process.signal("KILL").await;
    }
}

/// A Redis server of a test's own, on a free port, that the test may stop and
/// start again (same port, nothing kept on disk).
pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    pub async fn start() -> Self {
        let port = crate::process::free_port();
        let mut redis = Self { port, child: None };
        redis.resume().await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) and waits until it answers.
    pub async fn resume(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    /// Stops the server: everything it held is gone.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
    }
}

/// Deletes every key of a queue namespace (a flushed queue, or clean-up).
pub async fn flush_namespace(redis: &str, namespace: &str) {
    let client = redis::Client::open(redis).expect("a Redis URL");
    let mut conn = client.get_multiplexed_async_connection().await.expect("Redis answers");
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{namespace}*")).query_async(&mut conn).await.expect("KEYS");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.expect("DEL");
    }
}

/// Terminates every session of the program named `application` (its
/// `application_name`) on `pool`'s database, as a failover or a pooler restart
/// does; returns how many.
pub async fn terminate_sessions(pool: &PgPool, application: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(application)
    .fetch_one(pool)
    .await
    .expect("sessions terminated")
}
