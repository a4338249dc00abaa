//! End to end: `svc-api serve --dev-idp` as a developer runs it. A standard OAuth
//! client (`openid-client`, in `tests/oidc`, installed by `scripts/test-deps`)
//! signs in at the built-in issuer and calls the API with the token; the
//! process refuses to start off loopback; the seeding survives a restart; and
//! the secrets it writes to the env file never reach the log.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::http::HttpClient;
use svc_tests::process::{Spawned, binary, run};
use svc_tests::stack::{database_url, migrate};
use tokio::io::{AsyncBufReadExt, BufReader};

fn env_file() -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    std::env::temp_dir().join(format!("svc-dev-e2e-{}-{nanos}.env", std::process::id()))
}

/// Starts `svc-api serve --dev-idp` on `bind`; returns it and its base URL.
async fn serve_dev(database: &str, bind: &str, env_file: &Path) -> (Spawned, String) {
    let env_file = env_file.to_str().expect("a UTF-8 path");
    let envs = [
        ("DATABASE_URL", database),
        ("SVC_BIND", bind),
        ("SVC_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
        ("SVC_DEV_IDP", "true"),
        ("SVC_DEV_ENV_FILE", env_file),
    ];
    let mut api = Spawned::start("svc-api", &["serve"], &envs);
    let line = api.wait_for("svc-api listening").await;
    let log: Value = serde_json::from_str(&line).expect("a JSON log line");
    let base = log["fields"]["base_url"].as_str().expect("the base URL").to_owned();
    (api, base)
}

/// The values the env file exports.
fn exports(path: &Path) -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string(path).expect("the env file");
    text.lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.trim_matches('\'').to_owned()))
        .collect()
}

/// Runs `tests/oidc/dev-client.js` against the issuer; returns what it printed.
async fn oauth_client(issuer: &str, base: &str) -> Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("oidc");
    assert!(
        dir.join("node_modules/openid-client").exists(),
        "the OAuth client package is missing: run scripts/test-deps"
    );
    let run = tokio::process::Command::new("node")
        .arg("dev-client.js")
        .current_dir(&dir)
        .env("DEV_ISSUER", issuer)
        .env("SVC_URL", base)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the client finishes within a minute")
        .expect("node runs (Node 20 or later is needed)");
    assert!(output.status.success(), "the OAuth client failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON object on stdout")
}

#[sqlx::test(migrations = false)]
async fn devidp_serves_a_standard_oauth_client_end_to_end(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    let file = env_file();
    let (mut api, base) = serve_dev(&database, "127.0.0.1:0", &file).await;
    let issuer = format!("{base}/dev/oidc");
    let client = HttpClient::new(&base);
    let config = client.get("/api/public/client-config").await.json();
    assert_eq!(config["oauth"]["issuer"], issuer.as_str());
    assert_eq!(config["oauth"]["clientId"], "svc-cli");

    let result = oauth_client(&issuer, &base).await;
    assert_eq!(result["issuer"], issuer.as_str());
    assert_eq!(result["idToken"]["sub"], "local-developer");
    assert_eq!(result["idToken"]["iss"], issuer.as_str());
    assert_eq!(result["scope"], "openid email profile offline_access");
    for key in ["identity", "refreshedIdentity"] {
        let identity = &result[key];
        assert_eq!(identity["status"], 200, "{key}: {identity}");
        assert_eq!(identity["body"]["data"]["auth"]["mode"], "user");
        assert_eq!(identity["body"]["data"]["user"]["email"], "developer@svc.localhost");
    }
    assert_eq!(result["refreshRotated"], true);
    assert_eq!(result["reusedRefresh"], "invalid_grant");
    assert_eq!(result["wrongVerifier"], "invalid_grant");
    assert_eq!(result["spentCode"], "invalid_grant");

    // The env file's credentials work as they are.
    let env = exports(&file);
    assert_eq!(env["SVC_URL"], base);
    assert_eq!(env["SVC_ENDPOINT"], base);
    let status =
        client.post_json("/api/public/operations/identity/status", Some(&env["SVC_TOKEN"]), None, &json!({})).await;
    assert_eq!(status.status, 200, "{}", status.text());
    assert_eq!(status.json()["data"]["workspace"]["id"], env["SVC_WORKSPACE"].as_str());
    let agents =
        client.post_json("/api/public/operations/agents/list", Some(&env["SVC_API_KEY"]), None, &json!({})).await;
    assert_eq!(agents.status, 200, "{}", agents.text());

    // An MCP client that is refused learns where to sign in.
    let mcp = client
        .send(
            hyper::Method::POST,
            "/api/mcp",
            &[("content-type", "application/json"), ("accept", "application/json, text/event-stream")],
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }).to_string(),
        )
        .await;
    assert_eq!(mcp.status, 401);
    let metadata = format!("{base}/.well-known/oauth-protected-resource/api/mcp");
    assert_eq!(mcp.header("www-authenticate"), Some(format!("Bearer resource_metadata=\"{metadata}\"").as_str()));
    let document = client.get("/.well-known/oauth-protected-resource/api/mcp").await.json();
    assert_eq!(document["authorization_servers"], json!([issuer]));
    assert_eq!(document["resource"], format!("{base}/api/mcp"), "the resource the client called");

    api.terminate().await;
    let logs = api.logs();
    assert!(logs.contains(&format!("source {}", file.display())), "{logs}");
    for secret in [&env["SVC_TOKEN"], &env["SVC_API_KEY"]] {
        assert!(!logs.contains(secret.as_str()), "a secret in the log");
    }
    let _ = std::fs::remove_file(&file);
}

#[sqlx::test(migrations = false)]
async fn devidp_refuses_to_start_off_loopback(pool: PgPool) {
    let database = database_url(&pool);
    for (bind, base) in [("0.0.0.0:0", None), ("127.0.0.1:0", Some("https://svc.example.com"))] {
        let mut envs = vec![("DATABASE_URL", database.as_str()), ("SVC_BIND", bind), ("SVC_DEV_IDP", "true")];
        envs.extend(base.map(|base| ("SVC_PUBLIC_BASE_URL", base)));
        let (status, _, stderr) = run("svc-api", &["serve"], &envs).await;
        assert!(!status.success(), "{bind} {base:?}");
        assert!(stderr.contains("loopback"), "{stderr}");
    }
    let (status, _, stderr) =
        run("svc-api", &["serve", "--dev-idp"], &[("DATABASE_URL", &database), ("SVC_BIND", "0.0.0.0:0")]).await;
    assert!(!status.success());
    assert!(stderr.contains("SVC_BIND is 0.0.0.0:0"), "{stderr}");
}

#[sqlx::test(migrations = false)]
async fn devidp_seeding_survives_a_restart(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    // The same address both times, so the issuer (and so the User) is the same.
    let port = svc_tests::process::free_port();
    let bind = format!("127.0.0.1:{port}");
    let file = env_file();
    let (mut api, _) = serve_dev(&database, &bind, &file).await;
    let first = exports(&file);
    api.terminate().await;
    let (mut api, base) = serve_dev(&database, &bind, &file).await;
    let second = exports(&file);

    assert_eq!(second["SVC_WORKSPACE"], first["SVC_WORKSPACE"]);
    assert_ne!(second["SVC_API_KEY"], first["SVC_API_KEY"]);
    let client = HttpClient::new(&base);
    let status = |key: &str| {
        let client = client.clone();
        let key = key.to_owned();
        async move { client.post_json("/api/public/operations/identity/status", Some(&key), None, &json!({})).await }
    };
    let old = status(&first["SVC_API_KEY"]).await;
    assert_eq!(old.status, 401);
    assert_eq!(old.json()["error"]["details"]["reason"], "api_key_revoked");
    assert_eq!(status(&second["SVC_API_KEY"]).await.status, 200);
    // The first start's token was signed with a key the restart replaced.
    assert_eq!(status(&first["SVC_TOKEN"]).await.status, 401);
    let me = status(&second["SVC_TOKEN"]).await.json();
    let workspaces = client
        .post_json("/api/public/operations/workspaces/list", Some(&second["SVC_TOKEN"]), None, &json!({}))
        .await
        .json();
    assert_eq!(workspaces["data"]["workspaces"].as_array().map(Vec::len), Some(1), "{workspaces}");
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&pool).await.expect("a count");
    assert_eq!(users, 1, "{me}");
    api.terminate().await;
    let _ = std::fs::remove_file(&file);
}

#[sqlx::test(migrations = false)]
async fn devidp_signs_the_cli_in(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    let file = env_file();
    let (mut api, base) = serve_dev(&database, "127.0.0.1:0", &file).await;
    let home = env_file().with_extension("home");
    std::fs::create_dir_all(&home).expect("a home folder");
    let mut login = tokio::process::Command::new(binary("svc"))
        .args(["auth", "login", "--no-browser", "--json", "--endpoint", &base])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("SVC_CREDENTIAL_STORE", "file")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("svc runs");
    let mut stderr = BufReader::new(login.stderr.take().expect("piped stderr")).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
            .await
            .expect("svc prints the sign-in address")
            .expect("readable stderr")
            .expect("a sign-in address before the end");
        if line.starts_with("http") {
            break line;
        }
    };
    // The browser's part: the issuer sends it straight back to the CLI.
    let browser = HttpClient::new("");
    let redirect = browser.get(&url).await;
    assert_eq!(redirect.status, 302, "{}", redirect.text());
    let callback = browser.get(redirect.header("location").expect("a redirect")).await;
    assert_eq!(callback.status, 200, "{}", callback.text());
    let output = tokio::time::timeout(Duration::from_secs(30), login.wait_with_output())
        .await
        .expect("svc finishes")
        .expect("an exit status");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    let signed_in: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(signed_in["data"]["auth"]["mode"], "user");
    assert_eq!(signed_in["data"]["user"]["email"], "developer@svc.localhost");
    api.terminate().await;
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_file(&file);
}
