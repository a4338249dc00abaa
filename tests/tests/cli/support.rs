//! What the CLI tests share: a fresh database with the real `svc-api` on it, and
//! an `svc` run in a home of its own (config folder, credential-store service
//! name), so tests can run in parallel.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::http::HttpClient;
use svc_tests::process::{Spawned, binary, run};
use svc_tests::{AUDIENCE, ISSUER, TestIssuer};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The URL of the test's own database (created by `#[sqlx::test]`), migrated.
pub async fn migrated_database(pool: &PgPool) -> String {
    let url = svc_tests::stack::database_url(pool);
    let (status, _, stderr) = run("svc-api", &["migrate"], &[("DATABASE_URL", &url)]).await;
    assert!(status.success(), "migrate: {stderr}");
    url
}

/// Runs an operator command and returns the JSON object it printed.
pub async fn admin(database: &str, args: &[&str]) -> Value {
    let mut full = vec!["admin"];
    full.extend_from_slice(args);
    let (status, stdout, stderr) = run("svc-api", &full, &[("DATABASE_URL", database)]).await;
    assert!(status.success(), "svc-api {args:?} failed: {stderr}");
    serde_json::from_str(stdout.trim()).expect("JSON on stdout")
}

/// A running `svc-api`.
pub struct Api {
    pub process: Spawned,
    pub base: String,
}

impl Api {
    /// Serves `database` with User tokens from the shared test issuer (a JWKS file).
    pub async fn with_test_issuer(database: &str) -> Self {
        let jwks = TestIssuer::shared().jwks_path().to_str().expect("a UTF-8 path").to_owned();
        Self::start(
            database,
            &[("SVC_OIDC_ISSUER", ISSUER), ("SVC_OIDC_AUDIENCE", AUDIENCE), ("SVC_OIDC_JWKS_FILE", &jwks)],
        )
        .await
    }

    pub async fn start(database: &str, extra: &[(&str, &str)]) -> Self {
        let mut envs = vec![
            ("DATABASE_URL", database),
            ("SVC_BIND", "127.0.0.1:0"),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
        ];
        envs.extend_from_slice(extra);
        let mut process = Spawned::start("svc-api", &["serve"], &envs);
        let line = process.wait_for("svc-api listening").await;
        let log: Value = serde_json::from_str(&line).expect("a JSON log line");
        let addr = log["fields"]["addr"].as_str().expect("the bound address");
        Self { base: format!("http://{addr}"), process }
    }

    pub async fn stop(mut self) {
        let status = self.process.terminate().await;
        assert!(status.success(), "svc-api exits cleanly: {status}");
    }
}

/// A set-up User with a Workspace and an operator API key, made over HTTP with
/// the test issuer's tokens.
pub struct Tenant {
    pub workspace: String,
    pub api_key: String,
}

impl Tenant {
    pub async fn create(database: &str, api: &Api, subject: &str) -> Self {
        admin(
            database,
            &["user-setup", "--issuer", ISSUER, "--subject", subject, "--email", &format!("{subject}@example.test")],
        )
        .await;
        let client = HttpClient::new(&api.base);
        let token = TestIssuer::shared().token(subject);
        let op = |path: &str| format!("/api/public/operations/{path}");
        let ws = client.post_json(&op("workspaces/create"), Some(&token), None, &json!({ "name": subject })).await;
        assert_eq!(ws.status, 200, "{}", ws.text());
        let workspace = ws.json()["data"]["workspace"]["id"].as_str().expect("a Workspace id").to_owned();
        let key = client
            .post_json(
                &op("api-keys/create"),
                Some(&token),
                Some(&workspace),
                &json!({ "name": "ops", "preset": "operator" }),
            )
            .await;
        assert_eq!(key.status, 200, "{}", key.text());
        let api_key = key.json()["data"]["secret"].as_str().expect("a secret").to_owned();
        Self { workspace, api_key }
    }
}

/// What one `svc` run did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as JSON (what `--json` prints).
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Asserts the exit code, showing everything on failure.
    pub fn expect(self, code: i32) -> Self {
        assert_eq!(self.code, code, "exit code of svc:\n{self:#?}");
        self
    }
}

/// An `svc` home: its own config folder and credential-store service name.
pub struct Cli {
    pub home: PathBuf,
    pub keyring_service: String,
    envs: Vec<(String, String)>,
}

impl Cli {
    pub fn new(test: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let unique = format!("{test}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let home = std::env::temp_dir().join(format!("svc-cli-test-{unique}"));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).expect("a test home");
        let keyring_service = format!("svc-test-{unique}");
        Self { home, keyring_service, envs: Vec::new() }
    }

    /// Sets an environment variable for every later run.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.envs.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn config_dir(&self) -> PathBuf {
        self.home.join("config").join("svc")
    }

    pub fn command(&self, args: &[&str], extra: &[(&str, &str)]) -> Command {
        let mut command = Command::new(binary("svc"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("SVC_KEYRING_SERVICE", &self.keyring_service)
            .envs(self.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[]).await
    }

    pub async fn run_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Run {
        let output = tokio::time::timeout(Duration::from_secs(120), self.command(args, extra).output())
            .await
            .expect("svc finishes within two minutes")
            .expect("svc runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `svc` with its stdin (and output) on a pseudo-terminal, through
    /// util-linux `script`, typing `typed`; `None` where `script` is missing.
    pub async fn run_at_terminal(&self, args: &[&str], typed: &str) -> Option<Run> {
        let script = ["/usr/bin/script", "/bin/script"].into_iter().find(|p| Path::new(p).exists())?;
        let svc = binary("svc");
        let line = std::iter::once(svc.to_str().expect("a UTF-8 path"))
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let mut command = self.command(&[], &[]);
        let command = command.as_std_mut();
        let mut terminal = Command::new(script);
        terminal
            .args(["--quiet", "--return", "--command", &line, "/dev/null"])
            .env_clear()
            .envs(command.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = terminal.spawn().expect("script runs");
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(typed.as_bytes()).await.expect("typed");
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("svc finishes at the terminal")
            .expect("script runs");
        drop(stdin);
        Some(Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).replace('\r', ""),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// Every file under the home, as text (to look for leaked secrets).
    pub fn files_text(&self) -> String {
        fn walk(dir: &Path, out: &mut String) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    out.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        }
        let mut out = String::new();
        walk(&self.home, &mut out);
        out
    }

    /// Writes a file in the home and returns its path.
    pub async fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.home.join(name);
        let mut file = tokio::fs::File::create(&path).await.expect("a file in the test home");
        file.write_all(contents.as_bytes()).await.expect("written");
        path
    }
}

impl Drop for Cli {
    /// The home goes even when the test fails (a failure prints what it needs).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
