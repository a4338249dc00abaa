//! The web application at `/account` in a real browser: the real `svc-api`
//! binary, the test OpenID Connect provider (`tests/oidc/provider.js`) with a
//! confidential web client, and Debian's chromium driven by playwright-core
//! (`tests/browser/account.mjs`; `scripts/test-deps` installs both). The
//! script's screenshots go to `docs/screenshots/` with
//! `SVC_UPDATE_SCREENSHOTS=1`, else to a temporary folder.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use svc_tests::process::{Spawned, free_port};
use svc_tests::stack::{database_url, migrate};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const WEB_CLIENT_ID: &str = "svc-account";
const WEB_CLIENT_SECRET: &str = "a-test-secret-of-the-web-client";
const AUDIENCE: &str = "https://api.svc.test";

fn folder(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[sqlx::test(migrations = false)]
async fn a_new_user_signs_up_in_the_browser_and_invites_another(pool: PgPool) {
    assert!(
        folder("browser/node_modules/playwright-core").exists() && folder("oidc/node_modules/oidc-provider").exists(),
        "the browser test's packages are missing: run scripts/test-deps"
    );
    let database = database_url(&pool);
    migrate(&database).await;
    // The API's address is fixed first: the provider registers its redirect URI.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let redirect = format!("{base}/account/callback");
    let mut provider = Command::new("node")
        .arg("provider.js")
        .current_dir(folder("oidc"))
        .env("OIDC_AUDIENCE", AUDIENCE)
        .env("OIDC_ACCOUNTS", "alice,bob")
        .env("OIDC_WEB_CLIENT_ID", WEB_CLIENT_ID)
        .env("OIDC_WEB_CLIENT_SECRET", WEB_CLIENT_SECRET)
        .env("OIDC_WEB_REDIRECT_URI", &redirect)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = BufReader::new(provider.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider starts")
        .expect("its stdout")
        .expect("a line");
    let issuer = serde_json::from_str::<Value>(&first).expect("JSON")["issuer"].as_str().expect("an issuer").to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let bind = format!("127.0.0.1:{port}");
    let mut api = Spawned::start(
        "svc-api",
        &["serve"],
        &[
            ("DATABASE_URL", &database),
            ("SVC_BIND", &bind),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
            ("SVC_OIDC_ISSUER", &issuer),
            ("SVC_OIDC_AUDIENCE", AUDIENCE),
            ("SVC_OIDC_CLIENT_ID", "svc-cli"),
            ("SVC_ACCOUNT_CLIENT_ID", WEB_CLIENT_ID),
            ("SVC_ACCOUNT_CLIENT_SECRET", WEB_CLIENT_SECRET),
        ],
    );
    api.wait_for("svc-api listening").await;

    let scratch = svc_tests::TempDir::new("svc-account-screenshots");
    let screenshots = if std::env::var_os("SVC_UPDATE_SCREENSHOTS").is_some() {
        folder("../docs/screenshots")
    } else {
        scratch.path().to_owned()
    };
    let output = tokio::time::timeout(
        Duration::from_secs(240),
        Command::new("node")
            .arg("account.mjs")
            .current_dir(folder("browser"))
            .env("SVC_URL", &base)
            .env("SCREENSHOTS", &screenshots)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser run ends within 4 minutes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let results: Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(Value::Null);
    assert!(output.status.success(), "the browser run failed: {results:#}\n{stdout}\n{stderr}");

    assert_eq!(results["identityStatus"]["status"], 200, "{results:#}");
    assert_eq!(results["identityStatus"]["workspace"], "alice-labs");
    assert_eq!(results["forgedStatus"], 403);
    assert_eq!(results["bobRole"], "admin");
    let pages = results["pages"].as_array().expect("pages");
    assert!(pages.len() >= 9, "{results:#}");
    assert!(pages.iter().all(|p| p["serious"] == 0), "{results:#}");

    // What the browser did, as the database holds it.
    let roles: Vec<(String, String)> = sqlx::query_as(
        "SELECT u.subject, m.role::text FROM memberships m JOIN users u ON u.id = m.user_id ORDER BY u.subject",
    )
    .fetch_all(&pool)
    .await
    .expect("roles");
    assert_eq!(roles, [("alice".into(), "owner".into()), ("bob".into(), "admin".into())]);
    let logs = api.logs();
    for secret in [WEB_CLIENT_SECRET, "svck_"] {
        assert!(!logs.contains(secret), "a secret in the API's log");
    }
}
