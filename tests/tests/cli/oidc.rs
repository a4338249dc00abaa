//! A real OpenID Connect provider (`tests/oidc/provider.js`, the `oidc-provider`
//! package; `scripts/test-deps` installs it) and the browser step of a sign-in,
//! done over plain HTTP: follow the redirects, carry the cookies.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::capture::get;
use super::support::{Api, Cli, Run, admin};

/// The API audience the provider issues access tokens for.
pub const AUDIENCE: &str = "https://api.svc.test";
pub const CLIENT_ID: &str = "svc-cli";

pub struct Provider {
    pub issuer: String,
    _child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Provider {
    /// Starts the provider; `account` is who signs in, `ttl` the access tokens' lifetime.
    pub async fn start(account: &str, ttl: Duration) -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("oidc");
        assert!(
            dir.join("node_modules/oidc-provider").exists(),
            "the test provider's packages are missing: run scripts/test-deps"
        );
        let mut child = Command::new("node")
            .arg("provider.js")
            .current_dir(&dir)
            .env("OIDC_AUDIENCE", AUDIENCE)
            .env("OIDC_CLIENT_ID", CLIENT_ID)
            .env("OIDC_ACCOUNT", account)
            .env("OIDC_ACCESS_TOKEN_TTL", ttl.as_secs().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs (Node 20 or later is needed)");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), reader.next_line())
            .await
            .expect("the provider starts within 30 s")
            .expect("its stdout")
            .expect("a first line");
        let issuer = serde_json::from_str::<Value>(&first).expect("a JSON line")["issuer"]
            .as_str()
            .expect("the issuer")
            .to_owned();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().expect("the provider log").push(line);
            }
        });
        Self { issuer, _child: child, lines }
    }

    /// How many grants of `grant_type` the provider has issued.
    pub fn grants(&self, grant_type: &str) -> usize {
        let lines = self.lines.lock().expect("the provider log");
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["grantType"] == grant_type)
            .count()
    }

    /// Sets up `subject` as a User of the API (first-time setup is not ours).
    pub async fn set_up_user(&self, database: &str, subject: &str) {
        admin(
            database,
            &[
                "user-setup",
                "--issuer",
                &self.issuer,
                "--subject",
                subject,
                "--email",
                &format!("{subject}@example.test"),
            ],
        )
        .await;
    }

    /// Starts the API trusting this provider, keys found by discovery.
    pub async fn api(&self, database: &str) -> Api {
        Api::start(
            database,
            &[("SVC_OIDC_ISSUER", &self.issuer), ("SVC_OIDC_AUDIENCE", AUDIENCE), ("SVC_OIDC_CLIENT_ID", CLIENT_ID)],
        )
        .await
    }
}

/// Plays the browser: from the sign-in address, follows redirects with cookies
/// until the provider sends it to the loopback redirect; returns that address.
pub async fn browse(start: &str) -> String {
    let mut url = start.to_owned();
    let mut cookies: Vec<(String, String)> = Vec::new();
    for _ in 0..20 {
        let header = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
        let (status, headers, body) = get(&url, &header).await;
        for (name, value) in &headers {
            if name == "set-cookie" {
                let pair = value.split(';').next().unwrap_or_default();
                if let Some((k, v)) = pair.split_once('=') {
                    cookies.retain(|(name, _)| name != k);
                    if !v.is_empty() {
                        cookies.push((k.to_owned(), v.to_owned()));
                    }
                }
            }
        }
        let location = headers.iter().find(|(n, _)| n == "location").map(|(_, v)| v.clone());
        let Some(location) = location.filter(|_| (300..400).contains(&status)) else {
            panic!("the provider stopped redirecting at {url} ({status}): {body}");
        };
        url = if location.starts_with("http") {
            location
        } else {
            let origin = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
            format!("{origin}{location}")
        };
        if url.contains("/callback?") {
            return url;
        }
    }
    panic!("too many redirects");
}

/// Runs `svc auth login --no-browser`, does the browser step, and returns the run.
pub async fn login(cli: &Cli, api: &Api, extra: &[&str]) -> Run {
    login_with(cli, api, extra, |callback| callback).await
}

/// Like [`login`], letting the test change the redirect before it is followed.
pub async fn login_with(cli: &Cli, api: &Api, extra: &[&str], tamper: impl FnOnce(String) -> String) -> Run {
    let mut args = vec!["--no-browser"];
    args.extend_from_slice(extra);
    sign_in(cli, api, &args, &[], tamper).await
}

/// Runs `svc auth login` with `args` and the environment `env`, does the
/// browser step with the address it prints, and returns the run.
pub async fn sign_in(
    cli: &Cli,
    api: &Api,
    extra: &[&str],
    env: &[(&str, &str)],
    tamper: impl FnOnce(String) -> String,
) -> Run {
    let mut args = vec!["auth", "login", "--endpoint", api.base.as_str(), "--json"];
    args.extend_from_slice(extra);
    let mut command = cli.command(&args, env);
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("svc starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let mut seen = Vec::new();
    let address = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
            .await
            .expect("svc prints the sign-in address")
            .expect("stderr")
            .unwrap_or_else(|| panic!("svc ended before printing the address: {seen:?}"));
        if line.starts_with("http") {
            break line;
        }
        seen.push(line);
    };
    let callback = tamper(browse(&address).await);
    let (status, _, body) = get(&callback, "").await;
    let rest = tokio::spawn(async move {
        let mut rest = seen.join("\n");
        while let Ok(Some(line)) = stderr.next_line().await {
            rest.push('\n');
            rest.push_str(&line);
        }
        rest
    });
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("svc finishes the sign-in")
        .expect("svc runs");
    let stderr = rest.await.unwrap_or_default();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: format!("{stderr}\n(callback answered {status}: {body})"),
    }
}
