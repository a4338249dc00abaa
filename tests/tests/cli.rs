//! End to end: the real `svc` binary, against a local listener that records what it
//! sends, and against the real `svc-api` on a fresh database per test; sign-in
//! against a real OpenID Connect provider (`tests/oidc`, installed by
//! `scripts/test-deps`).
//!
//! Every test has its own config folder and credential-store service name
//! (`SVC_KEYRING_SERVICE`), so they run in parallel.

#[path = "cli/capture.rs"]
mod capture;
#[path = "cli/oidc.rs"]
mod oidc;
#[path = "cli/support.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sqlx::PgPool;
use svc_contract::catalog::flag_name;
use svc_contract::{CATALOG, Operation};
use svc_tests::http::HttpClient;

use capture::{Capture, LossyProxy};
use oidc::{Provider, login, login_with, sign_in};
use support::{Api, Cli, Tenant, migrated_database};

const CAPTURE_ANSWER: &str =
    r#"{"data": {"terminal": true, "status": "completed"}, "meta": {"requestId": "req_capture"}}"#;

fn capture_answer() -> Value {
    serde_json::from_str(CAPTURE_ANSWER).expect("JSON")
}

// ---------------------------------------------------------------------------
// What the client sends: table-driven over the catalog, against a listener.
// ---------------------------------------------------------------------------

/// A valid value for `schema`, recognisable by the property it is for.
fn sample(schema: &Value, name: &str) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values.iter().find(|v| !v.is_null()).cloned().expect("an enum value");
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        return Value::Object(properties.iter().map(|(k, s)| (k.clone(), sample(s, k))).collect());
    }
    if let Some(Value::Array(branches)) = schema.get("oneOf").or_else(|| schema.get("anyOf")) {
        let branch = branches.iter().find(|b| b.get("type") != Some(&json!("null"))).expect("a branch");
        return sample(branch, name);
    }
    let ty = match schema.get("type") {
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string"),
        Some(Value::String(t)) => t.as_str(),
        _ => "string",
    };
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    match ty {
        "boolean" => json!(true),
        "integer" => json!(((bound("minimum").unwrap_or(1.0) + bound("maximum").unwrap_or(9.0)) / 2.0).floor() as i64),
        "number" => json!((bound("minimum").unwrap_or(0.0) + bound("maximum").unwrap_or(1.0)) / 2.0),
        "array" => json!([sample(schema.get("items").expect("items"), name)]),
        "object" => json!({}),
        _ => match (schema.get("pattern").and_then(Value::as_str), schema.get("format").and_then(Value::as_str)) {
            (Some(p), _) if p.starts_with("^sha256:") => json!("sha256:to-be-computed"),
            (Some(p), _) if p.contains("[a-z0-9]+") => json!("sample-slug"),
            (Some(p), _) if p.starts_with("^#") => json!("#12ab34"),
            (Some(svc_contract::chat::ORIGIN_PATTERN), _) => json!("https://shop.example.test"),
            (_, Some("uri")) => json!("https://example.test/page"),
            (_, Some("email")) => json!("owner@example.test"),
            _ => json!(format!("{name}-sample")),
        },
    }
}

/// Gives every object with `content` the digest of that content.
fn fix_digests(value: &mut Value) {
    match value {
        Value::Object(members) => {
            if let Some(Value::String(content)) = members.get("content") {
                let digest = svc_contract::digest::sha256_prefixed(content.as_bytes());
                members.insert("digest".into(), json!(digest));
            }
            members.values_mut().for_each(fix_digests);
        }
        Value::Array(items) => items.iter_mut().for_each(fix_digests),
        _ => {}
    }
}

/// A valid input with as many properties as the schema allows at once.
fn sample_input(op: &Operation) -> Map<String, Value> {
    let schema = Value::Object(op.input_schema().clone());
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let mut value = sample(&schema, "");
    fix_digests(&mut value);
    let mut input = value.as_object().cloned().unwrap_or_default();
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let errors = |input: &Map<String, Value>| validator.iter_errors(&Value::Object(input.clone())).count();
    // Drop optional properties that exclude each other (`preset` or `scopes`).
    while errors(&input) > 0 {
        let best = input
            .keys()
            .filter(|k| !required.contains(&k.as_str()))
            .map(|k| {
                let mut fewer = input.clone();
                fewer.remove(k);
                (errors(&fewer), k.clone())
            })
            .min();
        match best {
            Some((count, key)) if count < errors(&input) => {
                input.remove(&key);
            }
            _ => panic!(
                "{}: no valid sample input: {:?}",
                op.id,
                validator.iter_errors(&Value::Object(input)).map(|e| e.to_string()).collect::<Vec<_>>()
            ),
        }
    }
    input
}

/// The command line that should produce `input` (contract §14's flag rules).
fn flags_for(input: &Map<String, Value>) -> Vec<String> {
    let mut args = Vec::new();
    for (name, value) in input {
        let flag = format!("--{}", flag_name(name));
        match value {
            Value::Bool(true) => args.push(flag),
            Value::Bool(false) => args.push(format!("{flag}=false")),
            Value::Null => args.extend([flag, String::new()]),
            Value::String(s) => args.extend([flag, s.clone()]),
            Value::Number(n) => args.extend([flag, n.to_string()]),
            Value::Array(items) if items.iter().all(Value::is_string) => {
                let joined = items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",");
                args.extend([flag, joined]);
            }
            Value::Array(items) => items.iter().for_each(|item| args.extend([flag.clone(), item.to_string()])),
            Value::Object(_) => args.extend([flag, value.to_string()]),
        }
    }
    args
}

#[tokio::test]
async fn every_operation_has_a_command_that_sends_exactly_its_input() {
    let capture = Capture::start(capture_answer()).await;
    let cli = Cli::new("catalog").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);
    for op in &CATALOG {
        let input = sample_input(op);
        let mut args: Vec<String> = op.cli_command.split(' ').map(str::to_owned).collect();
        args.extend(flags_for(&input));
        args.extend(["--workspace".into(), "ws_capture".into(), "--json".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = cli.run(&args).await.expect(0);
        assert_eq!(run.json(), capture_answer(), "{}: --json prints the envelope as answered", op.id);

        let requests = capture.take();
        assert_eq!(requests.len(), 1, "{}: one request", op.id);
        let request = &requests[0];
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", format!("/api/public/operations/{}", op.path).as_str())
        );
        assert_eq!(request.json(), Value::Object(input), "{}: the body is the input", op.id);
        assert_eq!(request.header("authorization"), Some("Bearer svck_capture1_secret"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("svc-client-version"), Some("0.1.2"));
        assert_eq!(request.header("svc-secret-location"), Some("environment"));
        let expected_workspace = (op.workspace != svc_contract::WorkspaceRequirement::None).then_some("ws_capture");
        assert_eq!(request.header("svc-workspace"), expected_workspace, "{}", op.id);
    }
}

#[tokio::test]
async fn mutations_get_a_fresh_idempotency_key_per_invocation() {
    let capture = Capture::start(capture_answer()).await;
    let cli = Cli::new("keys").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);
    cli.run(&["agent", "create", "--name", "A"]).await.expect(0);
    cli.run(&["agent", "create", "--name", "A"]).await.expect(0);
    cli.run(&["agent", "list"]).await.expect(0);
    let requests = capture.take();
    let keys: Vec<Value> = requests.iter().map(|r| r.json()["idempotencyKey"].clone()).collect();
    assert!(keys[0].as_str().is_some_and(|k| (8..=200).contains(&k.len())), "{keys:?}");
    assert_ne!(keys[0], keys[1], "a new key per invocation");
    assert_eq!(keys[2], Value::Null, "read operations take no key");
}

#[tokio::test]
async fn the_spec_named_flags_build_the_input() {
    let capture = Capture::start(capture_answer()).await;
    let cli = Cli::new("named").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);
    let text = "# FAQ\r\nÜmlauts stay exact.\n\n";
    let digest = svc_contract::digest::sha256_prefixed(text.as_bytes());
    let file = cli.write("faq.md", text).await;
    let file = file.to_str().expect("UTF-8");

    // --file, --provenance-kind/--provenance-uri, digest computed when omitted.
    for command in
        [&["knowledge-source", "add", "--key", "faq"][..], &["knowledge-source", "replace", "--source-id", "ks_1"]]
    {
        let mut args = command.to_vec();
        args.extend(["--agent-id", "agt_1", "--title", "FAQ", "--provenance-kind", "repository"]);
        args.extend(["--provenance-uri", "https://git.example.test/faq.md", "--revision", "r1", "--file", file]);
        cli.run(&args).await.expect(0);
        let body = capture.take().remove(0).json();
        assert_eq!(body["content"], text, "content is the file's bytes exactly");
        assert_eq!(body["digest"], digest.as_str());
        assert_eq!(body["provenance"], json!({ "kind": "repository", "uri": "https://git.example.test/faq.md" }));
    }

    // A --digest that does not match the file: exit 2 before any request.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let run = cli
        .run(&[
            "knowledge-source",
            "add",
            "--agent-id",
            "a",
            "--key",
            "k",
            "--title",
            "t",
            "--provenance-kind",
            "manual",
            "--provenance-uri",
            "notes",
            "--revision",
            "1",
            "--file",
            file,
            "--digest",
            &wrong,
            "--json",
        ])
        .await
        .expect(2);
    assert_eq!(run.json()["error"]["details"]["reason"], "digest_mismatch");
    assert_eq!(run.json()["meta"]["requestId"], Value::Null);
    assert!(capture.take().is_empty(), "nothing was sent");

    // --yes: the exact id the command names, and the other consents.
    cli.run(&["knowledge-source", "delete", "--agent-id", "agt_1", "--source-id", "ks_9", "--yes"]).await.expect(0);
    cli.run(&["public-chat", "disable", "--agent-id", "agt_7", "--yes"]).await.expect(0);
    cli.run(&["agent", "delete", "--agent-id", "agt_7", "--yes"]).await.expect(0);
    cli.run(&["public-chat", "disable", "--agent-id", "agt_7", "--confirm", "mine"]).await.expect(0);
    let bodies: Vec<Value> = capture.take().iter().map(|r| r.json()).collect();
    assert_eq!(
        (&bodies[0]["confirm"], &bodies[0]["tombstone"], &bodies[0]["prune"]),
        (&json!("ks_9"), &json!(true), &json!(true))
    );
    assert_eq!(bodies[1]["confirm"], "agt_7");
    assert_eq!(bodies[2]["confirm"], true);
    assert_eq!(bodies[3]["confirm"], "mine");

    // Arrays comma-separated or repeated; booleans as bare flags or =false;
    // an empty value sends null where null is allowed.
    cli.run(&["api-key", "create", "--name", "k", "--scopes", "agent:read,agent:write", "--scopes", "widget:read"])
        .await
        .expect(0);
    cli.run(&["agent", "configure", "--agent-id", "a", "--instructions", "", "--temperature", "1.5"]).await.expect(0);
    let bodies: Vec<Value> = capture.take().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["scopes"], json!(["agent:read", "agent:write", "widget:read"]));
    assert_eq!((&bodies[1]["instructions"], &bodies[1]["temperature"]), (&Value::Null, &json!(1.5)));

    // --manifest FILE: contentFile relative to the manifest, digest computed or checked.
    let manifest = json!({ "version": 1, "sources": [
        { "key": "faq", "title": "FAQ", "provenance": { "kind": "manual", "uri": "notes" }, "revision": "1", "contentFile": "faq.md" },
        { "key": "old", "tombstone": true, "confirm": "ks_3" }
    ]});
    let manifest_file = cli.write("kb.json", &manifest.to_string()).await;
    let manifest_file = manifest_file.to_str().expect("UTF-8");
    cli.run(&["knowledge-source", "reconcile", "--agent-id", "agt_1", "--manifest", manifest_file, "--prune"])
        .await
        .expect(0);
    cli.run(&[
        "knowledge-source",
        "reconcile",
        "--agent-id",
        "agt_1",
        "--manifest",
        manifest_file,
        "--apply",
        "--no-wait",
    ])
    .await
    .expect(0);
    let bodies: Vec<Value> = capture.take().iter().map(|r| r.json()).collect();
    let entry = &bodies[0]["manifest"]["sources"][0];
    assert_eq!((&entry["content"], &entry["digest"], entry.get("contentFile")), (&json!(text), &json!(digest), None));
    assert_eq!((bodies[0].get("dryRun"), &bodies[0]["prune"]), (None, &json!(true)), "a plan unless --apply");
    assert_eq!(bodies[1]["dryRun"], false);

    let mut bad = manifest.clone();
    bad["sources"][0]["digest"] = json!(wrong);
    let bad_file = cli.write("bad.json", &bad.to_string()).await;
    let run = cli
        .run(&[
            "knowledge-source",
            "reconcile",
            "--agent-id",
            "a",
            "--manifest",
            bad_file.to_str().expect("UTF-8"),
            "--json",
        ])
        .await
        .expect(2);
    assert_eq!(run.json()["error"]["details"]["path"], "/manifest/sources/0/digest");
    assert!(capture.take().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn input_is_validated_before_anything_is_sent() {
    let capture = Capture::start(capture_answer()).await;
    let cli = Cli::new("local").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);

    let run = cli.run(&["agent", "create", "--temperature", "3", "--default-language", "fr", "--json"]).await.expect(2);
    let envelope = run.json();
    assert_eq!(envelope["error"]["code"], "invalid_request");
    assert_eq!(envelope["meta"], json!({ "requestId": null }));
    let paths: Vec<&str> = envelope["error"]["details"]["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .filter_map(|i| i["path"].as_str())
        .collect();
    assert_eq!(paths, ["/defaultLanguage", "/name", "/temperature"], "every issue at once");

    // Without --json: the problem on stderr, nothing on stdout.
    let run = cli.run(&["agent", "create"]).await.expect(2);
    assert!(run.stdout.is_empty() && run.stderr.contains("invalid_request") && run.stderr.contains("/name"), "{run:?}");

    // A command line clap refuses is a usage error, in JSON too.
    let run = cli.run(&["agent", "create", "--name", "x", "--bogus", "--json"]).await.expect(2);
    assert_eq!(run.json()["error"]["details"]["reason"], "usage");
    assert_eq!(run.json()["meta"]["requestId"], Value::Null);

    // No credential at all: authentication_required, exit 3, before any request.
    let bare = Cli::new("bare").env("SVC_ENDPOINT", &capture.base);
    let run = bare.run(&["agent", "list", "--json"]).await.expect(3);
    assert_eq!(run.json()["error"]["code"], "authentication_required");
    assert!(capture.take().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn waiting_commands_poll_as_the_server_says() {
    // knowledge-source wait: asks again after retryAfterMs until terminal.
    let capture = Capture::start_with(|n| {
        let terminal = n >= 2;
        json!({ "data": { "terminal": terminal, "retryAfterMs": if terminal { Value::Null } else { json!(100) },
                          "knowledgeSource": { "state": if terminal { "active" } else { "processing" } } },
                "meta": { "requestId": format!("req_{n}") } })
    })
    .await;
    let cli = Cli::new("poll").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);
    let run = cli.run(&["knowledge-source", "wait", "--agent-id", "a", "--source-id", "s", "--json"]).await.expect(0);
    assert_eq!(run.json()["meta"]["requestId"], "req_2");
    assert_eq!(capture.take().len(), 3);

    // Nothing finishes: processing_timeout with the last wait's request id.
    let capture = Capture::start_with(|n| {
        json!({ "data": { "terminal": false, "retryAfterMs": 200, "knowledgeSource": { "state": "pending" } },
                "meta": { "requestId": format!("req_{n}") } })
    })
    .await;
    let started = Instant::now();
    let run = cli
        .run_with(
            &["knowledge-source", "wait", "--agent-id", "a", "--source-id", "s", "--timeout-ms", "700", "--json"],
            &[("SVC_ENDPOINT", &capture.base)],
        )
        .await
        .expect(4);
    let asked = capture.take().len();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(run.json()["error"]["code"], "processing_timeout");
    assert_eq!(run.json()["meta"]["requestId"], format!("req_{}", asked - 1), "the last wait's request id");
    assert!((3..=6).contains(&asked), "asked every retryAfterMs: {asked}");

    // reconcile --apply: replays the same request (same key) until the run ends.
    let capture = Capture::start_with(|n| {
        let status = if n < 2 { "applying" } else { "completed" };
        json!({ "data": { "status": status, "checkpoint": n, "plan": [] }, "meta": { "requestId": format!("req_{n}") } })
    })
    .await;
    let cli = Cli::new("replay").env("SVC_API_KEY", "svck_capture1_secret").env("SVC_ENDPOINT", &capture.base);
    let manifest = r#"{"version": 1, "sources": []}"#;
    let run = cli
        .run(&["knowledge-source", "reconcile", "--agent-id", "a", "--manifest", manifest, "--apply", "--json"])
        .await
        .expect(0);
    assert_eq!(run.json()["data"]["status"], "completed");
    let requests = capture.take();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.body == requests[0].body), "every replay is the same request, key included");
    assert_eq!(requests[0].json()["dryRun"], false);
}

// ---------------------------------------------------------------------------
// Against the real server.
// ---------------------------------------------------------------------------

#[sqlx::test(migrations = false)]
async fn exit_codes_follow_real_server_answers(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let api = Api::with_test_issuer(&database).await;
    let tenant = Tenant::create(&database, &api, "exits").await;
    let cli = Cli::new("exits").env("SVC_ENDPOINT", &api.base).env("SVC_API_KEY", &tenant.api_key);

    // 0: success, the envelope as answered.
    let run = cli.run(&["agent", "create", "--name", "Support", "--slug", "support", "--json"]).await.expect(0);
    assert_eq!(run.json()["data"]["agent"]["workspaceId"], tenant.workspace.as_str());
    assert!(run.json()["meta"]["requestId"].as_str().is_some_and(|id| id.starts_with("req_")));

    // 2: invalid_request only the server can find (the slug is taken).
    let run = cli.run(&["agent", "create", "--name", "Again", "--slug", "support", "--json"]).await.expect(2);
    assert_eq!(run.json()["error"]["details"]["reason"], "slug_taken");
    assert!(run.json()["meta"]["requestId"].as_str().is_some(), "the request id is kept on failure");

    // 3: an unknown key.
    let run = cli
        .run_with(&["agent", "list", "--json"], &[("SVC_API_KEY", "svck_Unknown1_abcdefghijklmnopqrstuvwxyz123456")])
        .await
        .expect(3);
    assert_eq!(run.json()["error"]["code"], "authentication_required");

    // 4: a resource that does not exist; without --json, on stderr with the request id.
    let run = cli.run(&["agent", "inspect", "--agent-id", "agt_nope"]).await.expect(4);
    assert!(run.stderr.contains("resource_not_found") && run.stderr.contains("(request req_"), "{run:?}");
    assert!(run.stdout.is_empty());

    // 1: internal_error from a server whose database is gone (503, retried once).
    let broken = Api::start("postgres://postgres@127.0.0.1:1/gone", &[]).await;
    let run = cli.run_with(&["agent", "list", "--json"], &[("SVC_ENDPOINT", &broken.base)]).await.expect(1);
    assert_eq!(run.json()["error"]["code"], "internal_error");
    assert!(run.json()["meta"]["requestId"].as_str().is_some());
    broken.stop().await;

    // 1: nobody listening.
    let run = cli.run_with(&["agent", "list", "--json"], &[("SVC_ENDPOINT", "http://127.0.0.1:1")]).await.expect(1);
    assert_eq!(run.json()["error"]["code"], "internal_error");
    assert_eq!(run.json()["meta"]["requestId"], Value::Null);
    api.stop().await;
}

/// The command line that sends `input` for `op`: `content` from a file (one
/// argument holds at most 128 KiB), every other property as its flag.
async fn command_for(cli: &Cli, op: &Operation, input: &Map<String, Value>) -> Vec<String> {
    let mut args: Vec<String> = op.cli_command.split(' ').map(str::to_owned).collect();
    let mut rest = input.clone();
    if let Some(Value::String(content)) = rest.remove("content") {
        let file = cli.write(&format!("{}.content", op.path.replace('/', "-")), &content).await;
        args.extend(["--file".to_owned(), file.to_str().expect("UTF-8").to_owned()]);
    }
    args.extend(flags_for(&rest));
    args.push("--json".to_owned());
    args
}

/// Every input the client refuses before sending, the server refuses with the
/// same code, message and issues (paths and messages), and the other way
/// round: both run `svc_contract::validate`. The table holds the rules the
/// client once checked differently: enum messages that list every allowed
/// value, the NUL character, `oneOf` as one sentence, and content sized in
/// bytes at its path.
#[sqlx::test(migrations = false)]
async fn the_client_and_the_server_refuse_the_same_inputs_alike(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let api = Api::with_test_issuer(&database).await;
    let tenant = Tenant::create(&database, &api, "alike").await;
    let cli = Cli::new("alike").env("SVC_ENDPOINT", &api.base).env("SVC_API_KEY", &tenant.api_key);
    let client = HttpClient::new(&api.base);
    let digest = |text: &str| svc_contract::digest::sha256_prefixed(text.as_bytes());
    let over_in_bytes = "€".repeat(svc_contract::knowledge::MAX_CONTENT_BYTES / 3 + 1);
    let provenance = json!({ "kind": "manual", "uri": "notes" });
    let entry = |key: &str, title: &str| {
        json!({ "key": key, "title": title, "provenance": provenance, "revision": "1",
                "digest": digest("FAQ"), "content": "FAQ" })
    };
    let table = [
        ("agent.create", json!({ "temperature": 3, "defaultLanguage": "fr" })),
        ("agent.configure", json!({ "agentId": "agt_x", "temperature": -1, "defaultLanguage": "de" })),
        ("api_key.create", json!({ "name": "k", "scopes": ["agent:read", "agent:admin"] })),
        ("api_key.create", json!({ "name": "k", "preset": "operator", "scopes": ["agent:read"] })),
        (
            "knowledge_source.add",
            json!({ "agentId": "agt_x", "key": "big", "title": "Big", "provenance": provenance, "revision": "1",
                    "digest": digest(&over_in_bytes), "content": over_in_bytes }),
        ),
        (
            "knowledge_source.reconcile",
            json!({ "agentId": "agt_x", "manifest": { "version": 1, "sources": [entry("a", "F\u{0}AQ"), entry("b", "")] } }),
        ),
    ];
    for (id, input) in table {
        let op = svc_contract::catalog::by_id(id).expect("an operation");
        let input = input.as_object().cloned().expect("an object");
        let served = client
            .post_json(&format!("/api/public/operations/{}", op.path), Some(&tenant.api_key), None, &json!(input))
            .await;
        assert_eq!(served.status, 400, "{id}: {}", served.text());
        let args = command_for(&cli, op, &input).await;
        let run = cli.run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await.expect(2);
        let local = run.json();
        assert_eq!(local["meta"]["requestId"], Value::Null, "{id}: refused before anything is sent");
        assert_eq!(local["error"], served.json()["error"], "{id}: the client and the server refuse alike");
        assert!(local["error"]["details"]["issues"].as_array().is_some_and(|i| !i.is_empty()), "{id}: {local}");
    }

    // Web addresses are the server's own rule (invalid_url with the rule
    // broken): the client sends them and shows the server's answer.
    let agent = cli.run(&["agent", "create", "--name", "Alike", "--json"]).await.expect(0).json();
    let agent = agent["data"]["agent"]["id"].as_str().expect("an Agent id").to_owned();
    let run = cli.run(&["public-chat", "enable", "--agent-id", &agent, "--website", "ftp://x.test", "--json"]).await;
    let answered = run.expect(2).json();
    assert_eq!(answered["error"]["details"]["reason"], "invalid_url", "{answered}");
    assert!(answered["meta"]["requestId"].as_str().is_some(), "the server answered: {answered}");
    api.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_lost_answer_is_retried_once_with_the_same_key(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let api = Api::with_test_issuer(&database).await;
    let tenant = Tenant::create(&database, &api, "retry").await;
    let proxy = LossyProxy::start(&api.base).await;
    let cli = Cli::new("retry").env("SVC_ENDPOINT", &proxy.base).env("SVC_API_KEY", &tenant.api_key);

    let run = cli.run(&["agent", "create", "--name", "Once", "--json"]).await.expect(0);
    assert_eq!(run.json()["data"]["agent"]["name"], "Once");

    let forwarded = proxy.forwarded();
    assert_eq!(forwarded.len(), 2, "the first attempt and one retry");
    let keys: Vec<Value> = forwarded.iter().map(|r| r.json()["idempotencyKey"].clone()).collect();
    assert!(keys[0].is_string());
    assert_eq!(keys[0], keys[1], "the retry carries the same key");

    let client = HttpClient::new(&api.base);
    let agents = client.post_json("/api/public/operations/agents/list", Some(&tenant.api_key), None, &json!({})).await;
    let agents = agents.json()["data"]["agents"].clone();
    let names: Vec<&str> = agents.as_array().expect("agents").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(names, ["Once"], "exactly one Agent was created");
    api.stop().await;
}

/// Needs the knowledge issue's server work (knowledge_source.add and .wait).
#[sqlx::test(migrations = false)]
async fn wait_gives_up_with_processing_timeout(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let api = Api::with_test_issuer(&database).await;
    let tenant = Tenant::create(&database, &api, "waiter").await;
    let cli = Cli::new("wait").env("SVC_ENDPOINT", &api.base).env("SVC_API_KEY", &tenant.api_key);
    let agent = cli.run(&["agent", "create", "--name", "Bot", "--json"]).await.expect(0).json();
    let agent = agent["data"]["agent"]["id"].as_str().expect("an Agent id").to_owned();
    let file = cli.write("notes.md", "Opening hours: 9 to 5.\n").await;

    // No worker runs, so processing cannot finish.
    let added = cli
        .run(&[
            "knowledge-source",
            "add",
            "--agent-id",
            &agent,
            "--key",
            "hours",
            "--title",
            "Hours",
            "--provenance-kind",
            "manual",
            "--provenance-uri",
            "notes",
            "--revision",
            "1",
            "--file",
            file.to_str().expect("UTF-8"),
            "--json",
        ])
        .await
        .expect(0)
        .json();
    let source = added["data"]["knowledgeSource"]["id"].as_str().expect("a source id").to_owned();

    let started = Instant::now();
    let run = cli
        .run(&[
            "knowledge-source",
            "wait",
            "--agent-id",
            &agent,
            "--source-id",
            &source,
            "--timeout-ms",
            "1500",
            "--json",
        ])
        .await
        .expect(4);
    let elapsed = started.elapsed();
    assert_eq!(run.json()["error"]["code"], "processing_timeout");
    assert!(
        run.json()["meta"]["requestId"].as_str().is_some_and(|id| id.starts_with("req_")),
        "the last wait's request id"
    );
    assert!(elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(15), "{elapsed:?}");
    api.stop().await;
}

#[sqlx::test(migrations = false)]
async fn pkce_login_stores_the_session_and_refreshes_it(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("alice", Duration::from_secs(6)).await;
    provider.set_up_user(&database, "alice").await;
    let api = provider.api(&database).await;
    let cli = Cli::new("login");

    let run = login(&cli, &api, &[]).await.expect(0);
    assert_eq!(run.json()["data"]["auth"]["mode"], "user", "login ends with identity.status");
    assert_eq!(run.json()["data"]["user"]["email"], "alice@example.test");
    assert_eq!(provider.grants("authorization_code"), 1);

    let status = cli.run(&["auth", "status", "--json"]).await.expect(0).json();
    assert_eq!(status["data"]["auth"]["mode"], "user");
    assert_eq!(status["data"]["auth"]["secretLocation"], "os_store");
    assert_eq!(status["data"]["client"]["version"], "0.1.2");
    let first_expiry = status["data"]["auth"]["expiresAt"].as_str().expect("an expiry").to_owned();

    let files = cli.files_text();
    assert!(files.contains("[profiles.default"), "a default profile: {files}");
    assert!(!files.contains("eyJ") && !files.contains("refresh"), "no token in any file: {files}");

    // Past the access token's expiry: the next call refreshes it first.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let status = cli.run(&["auth", "status", "--json"]).await.expect(0).json();
    assert_eq!(status["data"]["auth"]["mode"], "user");
    let second_expiry = status["data"]["auth"]["expiresAt"].as_str().expect("an expiry").to_owned();
    assert!(second_expiry > first_expiry, "a new access token: {first_expiry} then {second_expiry}");
    assert!(provider.grants("refresh_token") >= 1);

    // Logout forgets it.
    cli.run(&["auth", "logout", "--json"]).await.expect(0);
    let run = cli.run(&["auth", "status", "--json"]).await.expect(3);
    assert_eq!(run.json()["error"]["code"], "authentication_required");
    api.stop().await;
}

/// An access token that expires as soon as it is issued (a lifetime shorter
/// than the client's margin, as with a skewed clock): login's own check goes
/// through the refresh every other command uses, instead of presenting a
/// token that is already out of date.
#[sqlx::test(migrations = false)]
async fn login_renews_an_access_token_that_expires_at_once(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("frank", Duration::from_secs(2)).await;
    provider.set_up_user(&database, "frank").await;
    let api = provider.api(&database).await;
    let cli = Cli::new("short-lived");

    let run = login(&cli, &api, &[]).await.expect(0);
    assert_eq!(run.json()["data"]["auth"]["mode"], "user", "{run:?}");
    assert_eq!(provider.grants("authorization_code"), 1);
    assert_eq!(provider.grants("refresh_token"), 1, "login renewed the token before using it");
    api.stop().await;
}

/// Without a display, or when the opener fails, login prints the address to
/// open (and still completes) instead of waiting for a browser that never came.
#[sqlx::test(migrations = false)]
async fn login_without_a_display_prints_the_address(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("erin", Duration::from_secs(3600)).await;
    provider.set_up_user(&database, "erin").await;
    let api = provider.api(&database).await;

    // No DISPLAY or WAYLAND_DISPLAY (the test's environment is cleared).
    let cli = Cli::new("headless");
    let run = sign_in(&cli, &api, &[], &[], |c| c).await.expect(0);
    assert!(run.stderr.contains("No display was found") && !run.stderr.contains("Opened a browser"), "{run:?}");
    // The address is printed already: no advice to ask for it again.
    assert!(!run.stderr.contains("--no-browser"), "{run:?}");
    assert_eq!(run.json()["data"]["auth"]["mode"], "user");

    // A display, but the opener fails.
    let cli = Cli::new("opener");
    let bin = cli.home.join("bin");
    std::fs::create_dir_all(&bin).expect("a bin folder");
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, "#!/bin/sh\nexit 3\n").expect("a failing opener");
    std::process::Command::new("chmod").args(["+x", opener.to_str().expect("UTF-8")]).status().expect("chmod");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let env = [("DISPLAY", ":0"), ("PATH", path.as_str())];
    let run = sign_in(&cli, &api, &[], &env, |c| c).await.expect(0);
    assert!(run.stderr.contains("No browser could be opened"), "{run:?}");
    api.stop().await;
}

/// An API key in the environment wins over a session (contract §14): login
/// says so, and `auth status` names the credential it used and the one it
/// ignored.
#[sqlx::test(migrations = false)]
async fn login_warns_when_the_environment_key_comes_first(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("frank", Duration::from_secs(3600)).await;
    provider.set_up_user(&database, "frank").await;
    let api = provider.api(&database).await;
    let owner = Cli::new("keymaker");
    login(&owner, &api, &[]).await.expect(0);
    owner.run(&["workspace", "create", "--name", "Keys", "--json"]).await.expect(0);
    let key = owner.run(&["api-key", "create", "--name", "env", "--preset", "operator", "--json"]).await.expect(0);
    let key = key.json()["data"]["secret"].as_str().expect("a secret").to_owned();

    let cli = Cli::new("shadowed").env("SVC_API_KEY", &key);
    let run = login_with(&cli, &api, &[], |c| c).await.expect(0);
    assert_eq!(run.json()["data"]["auth"]["mode"], "user", "the answer shows the new session");
    assert!(
        run.stderr.contains("Warning: signed in, but commands will keep using SVC_API_KEY from the environment")
            && run.stderr.contains("unset SVC_API_KEY"),
        "{run:?}"
    );

    let status = cli.run(&["auth", "status"]).await.expect(0);
    assert!(status.stdout.contains("auth.mode: workspace_api_key"), "{status:?}");
    assert!(status.stdout.contains("Credential used: SVC_API_KEY from the environment\n"), "{status:?}");
    assert!(
        status.stdout.contains("Ignored: the session of profile default (svc auth login), which comes after it; unset SVC_API_KEY to use it"),
        "{status:?}"
    );
    let json = cli.run(&["auth", "status", "--json"]).await.expect(0).json();
    assert!(json.get("data").is_some() && json.get("meta").is_some() && json.as_object().map(|o| o.len()) == Some(2));

    // Without the variable the session is used, and nothing is ignored.
    let status = cli.run_with(&["auth", "status"], &[("SVC_API_KEY", "")]).await.expect(0);
    assert!(status.stdout.contains("auth.mode: user"), "{status:?}");
    assert!(
        status.stdout.contains("Credential used: the session of profile default") && !status.stdout.contains("Ignored")
    );
    cli.run(&["auth", "logout"]).await.expect(0);
    owner.run(&["auth", "logout"]).await.expect(0);
    api.stop().await;
}

#[sqlx::test(migrations = false)]
async fn a_sign_in_answer_with_another_state_is_refused(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("mallory", Duration::from_secs(3600)).await;
    provider.set_up_user(&database, "mallory").await;
    let api = provider.api(&database).await;
    let cli = Cli::new("state");

    let run = login_with(&cli, &api, &[], |callback| {
        let (before, after) = callback.split_once("state=").expect("a state");
        let rest = after.split_once('&').map_or(String::new(), |(_, rest)| format!("&{rest}"));
        format!("{before}state=forged{rest}")
    })
    .await
    .expect(3);
    assert_eq!(run.json()["error"]["details"]["reason"], "state_mismatch");
    assert_eq!(provider.grants("authorization_code"), 0, "the code was never redeemed");
    cli.run(&["auth", "status", "--endpoint", &api.base, "--json"]).await.expect(3);
    api.stop().await;
}

#[sqlx::test(migrations = false)]
async fn save_as_keeps_the_secret_in_the_credential_store_only(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("carol", Duration::from_secs(3600)).await;
    provider.set_up_user(&database, "carol").await;
    let api = provider.api(&database).await;
    let cli = Cli::new("saveas");
    login(&cli, &api, &[]).await.expect(0);
    cli.run(&["workspace", "create", "--name", "Keys", "--json"]).await.expect(0);

    let mut outputs = String::new();
    for (profile, store, location) in [("ci", None, "os_store"), ("ci-file", Some("file"), "secret_file")] {
        let extra: Vec<(&str, &str)> = store.map(|s| ("SVC_CREDENTIAL_STORE", s)).into_iter().collect();
        let run = cli
            .run_with(
                &["api-key", "create", "--name", profile, "--preset", "operator", "--save-as", profile, "--json"],
                &extra,
            )
            .await
            .expect(0);
        assert_eq!(run.json()["data"]["secret"], Value::Null, "--save-as prints no secret");
        assert_eq!(run.json()["data"]["secretReturned"], true);
        let prefix = run.json()["data"]["apiKey"]["keyPrefix"].as_str().expect("a key prefix").to_owned();
        outputs.push_str(&run.stdout);
        outputs.push_str(&run.stderr);

        let secret = match store {
            None => kernel_keyring_secret(&format!("keyring:{profile}/api-key@{}", cli.keyring_service)),
            Some(_) => {
                let path = cli.config_dir().join("secrets.toml");
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::metadata(&path).expect("the secret file").permissions().mode();
                    assert_eq!(mode & 0o777, 0o600, "only its owner can read it");
                }
                let text = std::fs::read_to_string(&path).expect("the secret file");
                let file: toml::Table = toml::from_str(&text).expect("TOML");
                file["secrets"][&format!("{profile}/api-key")].as_str().expect("the saved key").to_owned()
            }
        };
        assert!(secret.starts_with(&format!("{prefix}_")), "the store holds the key's secret");

        // The saved profile works, and says where its key lives.
        let status = cli.run(&["auth", "status", "--profile", profile, "--json"]).await.expect(0);
        assert_eq!(status.json()["data"]["auth"]["mode"], "workspace_api_key");
        assert_eq!(status.json()["data"]["auth"]["secretLocation"], location);
        assert_eq!(status.json()["data"]["credential"]["keyPrefix"], prefix.as_str());
        let created = cli.run(&["agent", "create", "--profile", profile, "--name", profile, "--json"]).await.expect(0);
        outputs.push_str(&status.stdout);
        outputs.push_str(&created.stdout);
        outputs.push_str(&created.stderr);

        assert!(!outputs.contains(&secret), "the secret appears in no output");
        let config = std::fs::read_to_string(cli.config_dir().join("config.toml")).expect("config.toml");
        assert!(!config.contains(&secret), "nor in config.toml");
        if store.is_none() {
            assert!(!cli.files_text().contains(&secret), "nor in any file");
        }
        assert!(!api.process.logs().contains(&secret), "nor in the server's logs");
    }

    // Without --save-as the new secret is shown once: the documented exception.
    let run = cli.run(&["api-key", "create", "--name", "shown", "--preset", "read_only", "--json"]).await.expect(0);
    assert!(run.json()["data"]["secret"].as_str().is_some_and(|s| s.starts_with("svck_")));
    forget_kernel_keyring_entry(&format!("keyring:ci/api-key@{}", cli.keyring_service));
    cli.run(&["auth", "logout"]).await.expect(0);
    api.stop().await;
}

/// Reads a secret from the kernel keyring, where the Linux credential store keeps it.
fn kernel_keyring_secret(description: &str) -> String {
    use linux_keyutils::{KeyRing, KeyRingIdentifier};
    let ring = KeyRing::from_special_id(KeyRingIdentifier::Session, false).expect("the session keyring");
    let key = ring.search(description).unwrap_or_else(|e| panic!("no key {description}: {e:?}"));
    String::from_utf8(key.read_to_vec().expect("readable")).expect("text")
}

/// Removes a test's entry from the kernel keyring.
fn forget_kernel_keyring_entry(description: &str) {
    use linux_keyutils::{KeyRing, KeyRingIdentifier};
    if let Ok(key) = KeyRing::from_special_id(KeyRingIdentifier::Session, false).and_then(|r| r.search(description)) {
        let _ = key.invalidate();
    }
}

#[sqlx::test(migrations = false)]
async fn the_workspace_comes_from_the_flag_then_the_profile_then_the_only_one(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let provider = Provider::start("dave", Duration::from_secs(3600)).await;
    provider.set_up_user(&database, "dave").await;
    let api = provider.api(&database).await;
    let cli = Cli::new("select");
    login(&cli, &api, &[]).await.expect(0);
    let id = |run: &support::Run, pointer: &str| {
        run.json().pointer(pointer).and_then(Value::as_str).expect("an id").to_owned()
    };
    let agents = |run: &support::Run| -> Vec<String> {
        run.json()["data"]["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .map(str::to_owned)
            .collect()
    };

    // The only Workspace: the server chooses it.
    let one = cli.run(&["workspace", "create", "--name", "One", "--slug", "one", "--json"]).await.expect(0);
    let one = id(&one, "/data/workspace/id");
    let created = cli.run(&["agent", "create", "--name", "InOne", "--json"]).await.expect(0);
    assert_eq!(id(&created, "/data/agent/workspaceId"), one);

    // Two Workspaces, nothing selected, stdin not a terminal: exit 4.
    let two = cli.run(&["workspace", "create", "--name", "Two", "--slug", "two", "--json"]).await.expect(0);
    let two = id(&two, "/data/workspace/id");
    let run = cli.run(&["agent", "list", "--json"]).await.expect(4);
    assert_eq!(run.json()["error"]["code"], "workspace_selection_required");

    // The flag.
    let created = cli.run(&["agent", "create", "--name", "InTwo", "--workspace", "two", "--json"]).await.expect(0);
    assert_eq!(id(&created, "/data/agent/workspaceId"), two);

    // At a terminal, the client lists the Workspaces (oldest first) and asks.
    if let Some(run) = cli.run_at_terminal(&["agent", "list", "--json"], "2\n").await {
        let run = run.expect(0);
        assert!(run.stdout.contains("1. One (one,") && run.stdout.contains("2. Two (two,"), "{run:?}");
        // At a terminal the envelope is indented, after the prompt.
        let start = run.stdout.find('{').expect("the envelope");
        let envelope: Value = serde_json::Deserializer::from_str(&run.stdout[start..])
            .into_iter()
            .next()
            .expect("one value")
            .expect("JSON");
        assert_eq!(envelope["data"]["agents"][0]["name"], "InTwo", "{run:?}");
    }

    // The profile, once selected; the flag still wins over it.
    let selected = cli.run(&["workspace", "select", "--workspace", "one", "--json"]).await.expect(0);
    assert_eq!(selected.json()["workspace"]["id"], one.as_str());
    assert_eq!(agents(&cli.run(&["agent", "list", "--json"]).await.expect(0)), ["InOne"]);
    assert_eq!(agents(&cli.run(&["agent", "list", "--workspace", &two, "--json"]).await.expect(0)), ["InTwo"]);

    // Selecting an unknown Workspace is refused and changes nothing.
    cli.run(&["workspace", "select", "--workspace", "nope", "--json"]).await.expect(4);
    assert_eq!(agents(&cli.run(&["agent", "list", "--json"]).await.expect(0)), ["InOne"]);
    cli.run(&["auth", "logout"]).await.expect(0);
    api.stop().await;
}

#[sqlx::test(migrations = false)]
async fn version_reports_compatibility_and_never_fails(pool: PgPool) {
    let database = migrated_database(&pool).await;
    let api = Api::with_test_issuer(&database).await;
    let cli = Cli::new("version");

    let run = cli.run(&["version", "--json", "--endpoint", &api.base]).await.expect(0);
    let version = run.json();
    assert_eq!(version["client"], json!({ "package": "svc-partner", "version": "0.1.2" }));
    assert_eq!((&version["contract"], &version["node"]), (&json!("1"), &json!(">=20")));
    assert_eq!(version["catalogDigest"], svc_contract::catalog::catalog_digest());
    assert_eq!(version["server"]["supportedClientRange"], "^0.1.2");
    assert_eq!(version["compatible"], true);

    let run = cli.run(&["version", "--json", "--endpoint", "http://127.0.0.1:1"]).await.expect(0);
    assert_eq!((&run.json()["server"], &run.json()["compatible"]), (&Value::Null, &Value::Null));
    api.stop().await;
}
