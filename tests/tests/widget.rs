//! The Widget in a real browser, end to end: the real `svc-api` and
//! `svc-worker` answer from processed Knowledge; `widget/e2e/browser.mjs`
//! drives Debian's Chromium (playwright-core) through a React host page on an
//! allowed origin and on a refused one, both under a strict CSP, and through
//! the Public Chat page. Needs `scripts/test-deps` (Chromium, widget/'s npm
//! packages). `SVC_SCREENSHOTS=docs` also refreshes the screenshots in docs/.

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::TestIssuer;
use svc_tests::process::free_port;
use svc_tests::stack::{Api, Worker, admin, database_url, flush_namespace, migrate, namespace};

const REDIS: &str = "redis://127.0.0.1:6379";
const TITLE: &str = "Harbour office";
const CONTENT: &str = "# Opening hours\n\nThe harbour office opens at nine in the morning and closes at five, Monday to \
                       Saturday.\n\n# Parking\n\nVisitors park for free at the north pier, next to the harbour office.";

struct Tenant {
    token: String,
    workspace: String,
    agent: String,
}

impl Tenant {
    async fn call(&self, api: &Api, path: &str, input: Value) -> Value {
        let (status, body) = api.op(path, &self.token, Some(&self.workspace), &input).await;
        assert_eq!(status, 200, "{path}: {body}");
        body["data"].clone()
    }
}

async fn tenant(api: &Api, database: &str) -> Tenant {
    let subject = format!("e2e-{}", namespace());
    admin(database, &["user-setup", "--issuer", svc_tests::ISSUER, "--subject", &subject, "--email", "w@example.test"])
        .await;
    let token = TestIssuer::shared().token(&subject);
    let (status, created) = api.op("workspaces/create", &token, None, &json!({ "name": "Harbour" })).await;
    assert_eq!(status, 200, "{created}");
    let workspace = created["data"]["workspace"]["id"].as_str().unwrap().to_owned();
    admin(database, &["plan-set", "--workspace", &workspace, "--plan", "pro"]).await;
    let (status, agent) = api.op("agents/create", &token, Some(&workspace), &json!({ "name": "Harbour" })).await;
    assert_eq!(status, 200, "{agent}");
    Tenant { token, workspace, agent: agent["data"]["agent"]["id"].as_str().unwrap().to_owned() }
}

#[sqlx::test(migrations = false)]
async fn the_widget_answers_in_a_browser_on_its_origin_only(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    let ns = namespace();
    // A fixed address, so the chat page's origin is the one browsers send.
    let bind = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{bind}");
    let settings = [
        ("SVC_QUEUE_NAMESPACE", ns.as_str()),
        ("REDIS_URL", REDIS),
        ("SVC_BIND", bind.as_str()),
        ("SVC_PUBLIC_BASE_URL", base.as_str()),
    ];
    let api = Api::start(&database, &settings).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let tenant = tenant(&api, &database).await;

    let source = tenant
        .call(
            &api,
            "knowledge-sources/add",
            json!({
                "agentId": tenant.agent, "key": "office", "title": TITLE,
                "provenance": { "kind": "repository", "uri": "https://harbour.example/office" },
                "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(CONTENT.as_bytes()), "content": CONTENT,
            }),
        )
        .await["knowledgeSource"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let waited =
            tenant.call(&api, "knowledge-sources/wait", json!({ "agentId": tenant.agent, "sourceId": source })).await;
        if waited["terminal"] == true {
            assert_eq!(waited["knowledgeSource"]["state"], "active", "{waited}");
            break;
        }
        assert!(Instant::now() < deadline, "not processed in time: {waited}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (allowed, refused) = (free_port(), free_port());
    tenant.call(&api, "public-chats/enable", json!({ "agentId": tenant.agent })).await;
    let configuration = json!({
        "allowedOrigins": [format!("http://127.0.0.1:{allowed}")],
        "appearance": {
            "headline": "Harbour Help", "description": "Opening hours, parking and moorings",
            "welcomeMessage": "Ahoy! What would you like to know?", "brandColor": "#0b4f6c",
            "bubbleStyle": "pill", "bubbleLabel": "Ask the harbour", "theme": "light",
        },
        "behavior": { "predefinedQuestions": [
            { "question": "Where do I park?", "order": 2 }, { "question": "When is the office open?", "order": 1 },
        ] },
    });
    tenant.call(&api, "widgets/configure", json!({ "agentId": tenant.agent, "configuration": configuration })).await;

    let widget = Path::new(env!("CARGO_MANIFEST_DIR")).join("../widget");
    let mut command = tokio::process::Command::new("node");
    command
        .arg("e2e/browser.mjs")
        .current_dir(&widget)
        .env("SVC_API", &base)
        .env("SVC_AGENT", &tenant.agent)
        .env("SVC_ALLOWED_PORT", allowed.to_string())
        .env("SVC_REFUSED_PORT", refused.to_string())
        .env("SVC_SOURCE_TITLE", TITLE)
        .kill_on_drop(true);
    if let Ok(folder) = std::env::var("SVC_SCREENSHOTS") {
        command.env("SVC_SCREENSHOTS", Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(folder));
    }
    let run = tokio::time::timeout(Duration::from_secs(600), command.output()).await;
    let output = run.expect("the browser test ends within ten minutes").expect("node runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "browser test failed:\n{stdout}\n{stderr}\napi:\n{}", api.process.logs());
    assert!(stdout.contains("passed"), "{stdout}");
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}
