//! The README's quick start, run as written: `deploy/run-local` on a fresh
//! database, then the shell blocks between `<!-- quickstart -->` and
//! `<!-- /quickstart -->`, verbatim, in one bash. Its log must have one access
//! line per request and no secret.

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use svc_tests::process::{Spawned, free_port};
use svc_tests::stack::{database_url, namespace};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The shell blocks of the README between `<!-- NAME -->` and `<!-- /NAME -->`,
/// joined.
fn marked(readme: &str, name: &str) -> String {
    let start =
        readme.find(&format!("<!-- {name} -->")).unwrap_or_else(|| panic!("the README marks its {name} blocks"));
    let end = readme.find(&format!("<!-- /{name} -->")).unwrap_or_else(|| panic!("the README marks where {name} ends"));
    let mut script = String::new();
    let mut in_block = false;
    for line in readme[start..end].lines() {
        match (in_block, line.trim_end()) {
            (false, "```sh") => in_block = true,
            (true, "```") => in_block = false,
            (true, line) => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    assert!(!script.is_empty(), "the {name} part has shell blocks");
    script
}

fn quick_start(readme: &str) -> String {
    marked(readme, "quickstart")
}

/// `deploy/run-local` on this test's (unmigrated) database, a free port and a
/// queue namespace of its own, logging as JSON, its env file in `dir`; once
/// the API and the worker are up.
async fn run_local(pool: &PgPool, dir: &Path) -> (Spawned, String) {
    let env_file = dir.join(".svc-dev.env");
    let database = database_url(pool);
    let bind = format!("127.0.0.1:{}", free_port());
    let queue = namespace();
    let local = Spawned::start_group(
        &repository().join("deploy/run-local"),
        &[
            ("DATABASE_URL", database.as_str()),
            ("SVC_BIND", bind.as_str()),
            ("SVC_QUEUE_NAMESPACE", queue.as_str()),
            ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
            ("SVC_DEV_ENV_FILE", env_file.to_str().unwrap()),
            ("SVC_LOG_FORMAT", "json"),
            ("SQLX_OFFLINE", "true"),
        ],
    );
    let wait = async {
        while !local.logs().contains("svc-api listening") || !local.logs().contains("svc-worker started") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(600), wait).await.is_err() {
        panic!("deploy/run-local did not start the service:\n{}", local.logs());
    }
    (local, bind)
}

/// Runs `script` in bash in `dir`, with `curl` wrapped to dump each response's
/// headers into `dir/headers/` (to learn every request id the quick start got).
async fn run_script(dir: &Path, script: &str) -> (bool, String, String) {
    run_in(dir, script, &[]).await
}

/// [`run_script`] with `envs` set besides (`PATH` is prefixed, not replaced).
async fn run_in(dir: &Path, script: &str, envs: &[(&str, String)]) -> (bool, String, String) {
    let real_curl = which("curl");
    let bin = dir.join("bin");
    let headers = dir.join("headers");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&headers).unwrap();
    let wrapper =
        format!("#!/bin/sh\nexec {} -D \"{}/$$-$(date +%s%N)\" \"$@\"\n", real_curl.display(), headers.display());
    std::fs::write(bin.join("curl"), wrapper).unwrap();
    std::process::Command::new("chmod").args(["+x", bin.join("curl").to_str().unwrap()]).status().unwrap();
    let mut path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = tokio::process::Command::new("bash");
    for (name, value) in envs {
        if *name == "PATH" {
            path = format!("{value}:{path}");
        } else {
            command.env(name, value);
        }
    }
    let child =
        command.args(["-euo", "pipefail", "-c", script]).current_dir(dir).env("PATH", path).kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(180), child).await.expect("the quick start ends").unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn which(program: &str) -> PathBuf {
    let out = std::process::Command::new("sh").args(["-c", &format!("command -v {program}")]).output().unwrap();
    assert!(out.status.success(), "{program} is needed (apt-get install {program})");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The request ids in the dumped response headers.
fn curl_request_ids(dir: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir.join("headers")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let id = text.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("x-request-id").then(|| value.trim().to_owned())
        });
        ids.push(id.expect("every response carries X-Request-Id"));
    }
    ids
}

fn secrets_of(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches(|c| c == '\'' || c == '"').to_owned()))
        .collect()
}

/// The README's JSON snippets (the MCP client configuration) are JSON, and the
/// MCP one points at the endpoint with a bearer header.
#[test]
fn the_readme_json_snippets_parse() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let blocks: Vec<Value> = readme
        .split("```json\n")
        .skip(1)
        .map(|rest| serde_json::from_str(&rest[..rest.find("```").unwrap()]).expect("a README JSON block parses"))
        .collect();
    let mcp = blocks.iter().find_map(|b| b.get("mcpServers")).expect("an mcpServers snippet");
    let server = mcp.as_object().unwrap().values().next().unwrap();
    assert!(server["url"].as_str().unwrap().ends_with("/api/mcp"), "{server}");
    assert!(server["headers"]["Authorization"].as_str().unwrap().starts_with("Bearer "), "{server}");
}

#[sqlx::test(migrations = false)]
async fn the_readme_quick_start_runs_as_written(pool: PgPool) {
    let repo = repository();
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let script = quick_start(&readme);
    let temp = svc_tests::TempDir::new("svc-quickstart");
    let dir = temp.path().to_owned();
    let env_file = dir.join(".svc-dev.env");
    let (mut local, bind) = run_local(&pool, &dir).await;

    let (ok, stdout, stderr) = run_script(&dir, &script).await;
    assert!(ok, "the quick start failed:\nstdout:\n{stdout}\nstderr:\n{stderr}\nservice:\n{}", local.logs());
    // What each block shows: who is calling, the Agent, the list, the chat URL
    // and an answer from the Knowledge just added, its last sentence whole.
    assert!(stdout.contains("\"user\""), "{stdout}");
    assert!(stdout.contains("agt_"), "{stdout}");
    assert!(stdout.contains("\"Support\""), "{stdout}");
    assert!(stdout.contains(&format!("http://{bind}/chat/agt_")), "{stdout}");
    // The question shares no word with the Knowledge: it is found by meaning,
    // and quoted whole.
    let quoted =
        "\"From “Refund policy”: Refunds: you can return any item within 30 days of delivery for a full refund.\"";
    assert!(stdout.contains(quoted), "the answer quotes the Knowledge: {stdout}");

    // Run again, as a newcomer will: the same Agent and source, no error.
    let (again, stdout_again, stderr_again) = run_script(&dir, &script).await;
    assert!(again, "a second run failed:\nstdout:\n{stdout_again}\nstderr:\n{stderr_again}");
    assert_eq!(stdout_again, stdout, "a second run answers what the first did");
    assert!(stderr.is_empty() && stderr_again.is_empty(), "{stderr}{stderr_again}");

    // A failure shows its problem instead of a `null` further on: here the
    // API key was revoked (a restarted API writes a new one).
    let env_text = std::fs::read_to_string(&env_file).unwrap();
    let revoked = secrets_of(&env_text)["SVC_API_KEY"].clone();
    let stale = env_text.replace(&revoked, "svck_Revoked1_abcdefghijklmnopqrstuvwxyz123456");
    std::fs::write(&env_file, stale).unwrap();
    let (_, out, err) = run_script(&dir, &script).await;
    std::fs::write(&env_file, env_text).unwrap();
    assert!(out.contains("error: authentication_required: "), "the wait shows the problem:\n{out}\n{err}");
    assert!(out.contains("\"code\": \"authentication_required\""), "so does the list:\n{out}\n{err}");

    local.signal("INT").await;
    let stopped = async {
        while !local.logs().contains("svc-worker stopped") && !local.logs().contains("shutting down") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), stopped).await;
    let log = local.logs();

    // One access line per request: every response's request id once, and no
    // line for a request that was not made.
    let lines: Vec<Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let access: Vec<&Value> = lines.iter().filter(|l| l["target"] == "svc_api::access").collect();
    let mut logged = BTreeSet::new();
    for line in &access {
        let fields = &line["fields"];
        for field in ["surface", "operation", "method", "path", "status", "duration_ms", "request_id"] {
            assert!(!fields[field].is_null(), "{field} missing: {line}");
        }
        assert_eq!(line["level"], "INFO", "{line}");
        assert!(logged.insert(fields["request_id"].as_str().unwrap().to_owned()), "two lines for one request: {line}");
    }
    let requested: BTreeSet<String> = curl_request_ids(&dir).into_iter().collect();
    assert_eq!(logged, requested, "access lines and requests differ");
    assert!(access.iter().any(|l| l["fields"]["operation"] == "agent.create"), "{log}");

    // No secret, and nothing the quick start did is an error.
    let secrets = secrets_of(&std::fs::read_to_string(&env_file).unwrap());
    for name in ["SVC_TOKEN", "SVC_API_KEY"] {
        let secret = &secrets[name];
        assert!(secret.len() > 20, "{name} is in the env file");
        assert!(!log.contains(secret.as_str()), "{name} reached the log");
    }
    assert!(!log.contains("Bearer "), "a credential header reached the log");
    assert!(!lines.iter().any(|l| l["level"] == "ERROR"), "an error was logged:\n{log}");
}

/// The README's Widget section after its quick start, as a newcomer goes on:
/// the commands that allow an origin and print the manifest, then the
/// tarball built from this repository (at its root) and installed into a
/// site's folder. Then an operator command from a second terminal: a fresh
/// shell that has only sourced `.svc-dev.env` reaches the database
/// `deploy/run-local` serves.
#[sqlx::test(migrations = false)]
async fn the_readme_widget_and_operator_commands_run_as_written(pool: PgPool) {
    let repo = repository();
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let temp = svc_tests::TempDir::new("svc-readme-widget");
    let dir = temp.path().to_owned();
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    let (mut local, bind) = run_local(&pool, &dir).await;

    let script = format!("{}\ncd {}\n{}", quick_start(&readme), repo.display(), marked(&readme, "widget"));
    let bins = repo.join("target/debug").display().to_string();
    let envs = [("PATH", bins.clone()), ("SITE", site.display().to_string())];
    let (ok, stdout, stderr) = run_in(&dir, &script, &envs).await;
    assert!(ok, "the Widget section failed:\nstdout:\n{stdout}\nstderr:\n{stderr}\nservice:\n{}", local.logs());
    assert!(stdout.contains(&format!("\"chat\": \"http://{bind}/chat/agt_")), "{stdout}");
    assert!(stdout.contains("\"packageName\": \"svc-widget-react\""), "{stdout}");
    // The CLI's verify: a question in other words than the Knowledge's, answered.
    assert!(
        stdout.contains("Refunds: you can return any item within 30 days of delivery for a full refund."),
        "{stdout}"
    );
    let installed = site.join("node_modules/svc-widget-react/package.json");
    assert!(installed.exists(), "the tarball is installed in the site's folder: {stdout}\n{stderr}");

    // A second terminal: nothing but PATH and HOME, then the block.
    let operator = marked(&readme, "operator");
    let child = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &operator])
        .current_dir(&dir)
        .env_clear()
        .env("PATH", format!("{bins}:/usr/bin:/bin"))
        .env("HOME", &dir)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), child).await.expect("the command ends").unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the operator command failed:\n{stdout}\n{stderr}");
    let plan: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(plan["plan"], "pro", "{plan}");

    local.signal("INT").await;
}
