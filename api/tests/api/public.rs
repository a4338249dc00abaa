//! The answering side of Public Chat and the Widget (contract §12):
//! `widget.verify`'s six checks and its conversation, the public answers
//! endpoint (origins, CORS, rate limit, conversations, bounds) and the chat page.

use axum::body::Body;
use http::Request;
use serde_json::{Value, json};
use sqlx::PgPool;
use svc_api::config::ServeConfig;
use svc_core::ids::RevisionId;
use svc_core::knowledge::process;
use svc_tests::http::TestResponse;
use svc_tests::llm::{self, Reply};

use crate::helpers::{BASE_URL, TestApp, TestUser, assert_ok, assert_problem, config};
use crate::knowledge::{add_input, processing};

const SHOP: &str = "https://shop.example";
const SHIPPING: &str = "# Shipping\n\nWe ship to Canada and the European Union. Standard delivery takes three to \
                        five business days. Shipping is free on orders over 50 dollars.";

struct Setup {
    app: TestApp,
    owner: TestUser,
    ws: String,
    /// An Agent that is ready: one active source, Public Chat enabled, [`SHOP`] allowed.
    agent: String,
    source: String,
}

async fn setup(pool: PgPool) -> Setup {
    setup_with(pool, config()).await
}

async fn setup_with(pool: PgPool, config: ServeConfig) -> Setup {
    let app = TestApp::with_config(pool, config).await;
    let (owner, ws) = app.owner("alice").await;
    let mut s = Setup { app, owner, ws, agent: String::new(), source: String::new() };
    s.agent = s.app.agent(&s.owner, &s.ws, "Helper").await;
    s.source = s.add_source(&s.agent, "shipping", SHIPPING, true).await;
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    s.ok("widgets/configure", json!({ "agentId": s.agent, "configuration": { "allowedOrigins": [SHOP] } })).await;
    s
}

impl Setup {
    async fn call(&self, path: &str, input: Value) -> TestResponse {
        self.app.op(path, &self.owner.token, Some(&self.ws), input).await
    }

    async fn ok(&self, path: &str, input: Value) -> Value {
        assert_ok(path, &self.call(path, input).await)
    }

    /// Adds a required source; processes it to active when `process_it`.
    /// Returns its id.
    async fn add_source(&self, agent: &str, key: &str, content: &str, process_it: bool) -> String {
        self.add(add_input(agent, key, content), process_it).await
    }

    async fn add(&self, input: Value, process_it: bool) -> String {
        let source = self.ok("knowledge-sources/add", input).await["knowledgeSource"].clone();
        if process_it {
            let revision = RevisionId::parse(source["pendingRevision"]["id"].as_str().unwrap()).unwrap();
            process(&self.app.pool, revision, &processing("test")).await.unwrap();
        }
        source["id"].as_str().unwrap().to_owned()
    }

    async fn verify(&self, origin: &str) -> TestResponse {
        self.verify_agent(&self.agent, origin).await
    }

    async fn verify_agent(&self, agent: &str, origin: &str) -> TestResponse {
        let input = json!({ "agentId": agent, "origin": origin, "question": "How long does delivery take?" });
        self.call("widgets/verify", input).await
    }

    async fn conversations(&self) -> u64 {
        let data = self.ok("workspaces/entitlements/inspect", json!({})).await;
        data["entitlement"]["usage"]["conversations"].as_u64().unwrap()
    }

    /// Asks the answers endpoint of `agent` from `origin`.
    async fn ask_agent(
        &self,
        agent: &str,
        origin: Option<&str>,
        headers: &[(&str, &str)],
        body: Value,
    ) -> TestResponse {
        let mut request = Request::builder()
            .method("POST")
            .uri(format!("/api/public/chat/{agent}/answers"))
            .header("content-type", "application/json");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.app.send(request.body(Body::from(body.to_string())).unwrap()).await
    }

    async fn ask(&self, origin: Option<&str>, question: &str) -> TestResponse {
        self.ask_agent(&self.agent, origin, &[], json!({ "question": question })).await
    }

    async fn get(&self, path: &str) -> TestResponse {
        self.app.send(Request::builder().uri(path).body(Body::empty()).unwrap()).await
    }
}

/// `details.checks` of a failed verify, and that nothing was spent.
async fn failed_checks(s: &Setup, response: &TestResponse) -> Value {
    let body = assert_problem(response, 422, "processing_failed");
    assert_eq!(s.conversations().await, 0, "a failed verify spends no conversation");
    body["error"]["details"]["checks"].clone()
}

fn checks_failing(failing: &[&str]) -> Value {
    let mut checks = json!({
        "agent": true, "configuration": true, "origin": true, "knowledge": true, "publicChat": true, "answer": false,
    });
    for name in failing {
        checks[*name] = false.into();
    }
    checks
}

#[sqlx::test(migrations = "../migrations")]
async fn verify_fails_each_check_on_its_own(pool: PgPool) {
    let s = setup(pool).await;

    // origin: not allowed, or not an origin at all.
    for origin in ["https://other.example", "https://shop.example/", "shop.example", "http://shop.example"] {
        assert_eq!(failed_checks(&s, &s.verify(origin).await).await, checks_failing(&["origin"]), "{origin}");
    }

    // knowledge: no active source at all...
    let bare = s.app.agent(&s.owner, &s.ws, "Bare").await;
    s.ok("public-chats/enable", json!({ "agentId": bare })).await;
    s.ok("widgets/configure", json!({ "agentId": bare, "configuration": { "allowedOrigins": [SHOP] } })).await;
    assert_eq!(failed_checks(&s, &s.verify_agent(&bare, SHOP).await).await, checks_failing(&["knowledge"]));
    // ... or a required source not active yet; an optional one does not count.
    let mut optional = add_input(&s.agent, "optional", "Optional notes.");
    optional["required"] = false.into();
    s.add(optional, false).await;
    assert_ok("widgets/verify", &s.verify(SHOP).await);
    let pending = s.add_source(&s.agent, "returns", "Returns within 30 days.", false).await;
    assert_eq!(failed_checks_after(&s, 1, &s.verify(SHOP).await).await, checks_failing(&["knowledge"]));
    let source = s.ok("knowledge-sources/inspect", json!({ "agentId": s.agent, "sourceId": pending })).await;
    let revision = RevisionId::parse(source["knowledgeSource"]["pendingRevision"]["id"].as_str().unwrap()).unwrap();
    process(&s.app.pool, revision, &processing("test")).await.unwrap();
    assert_ok("widgets/verify", &s.verify(SHOP).await);

    // publicChat: disabled.
    s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    assert_eq!(failed_checks_after(&s, 2, &s.verify(SHOP).await).await, checks_failing(&["publicChat"]));
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;

    // configuration: a stored origin today's rules refuse.
    sqlx::query(
        "UPDATE widget_configurations SET configuration = jsonb_set(configuration, '{allowedOrigins}', \
         '[\"https://shop.example\", \"http://legacy.example\"]')",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(failed_checks_after(&s, 2, &s.verify(SHOP).await).await, checks_failing(&["configuration"]));

    // agent: none by that id here.
    let other = s.app.user("bob").await;
    let theirs = s.app.workspace(&other, "bob workspace").await;
    let their_agent = s.app.agent(&other, &theirs, "Theirs").await;
    assert_problem(&s.verify_agent(&their_agent, SHOP).await, 404, "resource_not_found");
    assert_problem(&s.verify_agent("agent_nope", SHOP).await, 404, "resource_not_found");
}

/// As [`failed_checks`], when `spent` conversations were spent before.
async fn failed_checks_after(s: &Setup, spent: u64, response: &TestResponse) -> Value {
    let body = assert_problem(response, 422, "processing_failed");
    assert_eq!(s.conversations().await, spent, "a failed verify spends no conversation");
    body["error"]["details"]["checks"].clone()
}

#[sqlx::test(migrations = "../migrations")]
async fn verify_answers_from_the_knowledge_and_spends_one_conversation(pool: PgPool) {
    let s = setup(pool).await;
    assert_eq!(s.conversations().await, 0);
    let data = assert_ok("widgets/verify", &s.verify(SHOP).await);
    assert_eq!(
        data["checks"],
        json!({
            "agent": true, "configuration": true, "origin": true, "knowledge": true, "publicChat": true, "answer": true,
        })
    );
    assert_eq!((data["agentId"].as_str(), data["origin"].as_str()), (Some(s.agent.as_str()), Some(SHOP)));
    assert_eq!(data["configuration"]["allowedOrigins"], json!([SHOP]));
    let answer = data["answer"].as_str().unwrap();
    assert!(answer.contains("three to five business days"), "{answer}");
    assert_eq!(s.conversations().await, 1);
    // The origin is normalised before it is checked, and the default question asked.
    let data = assert_ok(
        "widgets/verify",
        &s.call("widgets/verify", json!({ "agentId": s.agent, "origin": "HTTPS://Shop.Example:443" })).await,
    );
    assert_eq!(data["origin"], SHOP);
    assert_eq!(s.conversations().await, 2, "one conversation per call");
    // An API key with widget:write may verify; one without may not.
    let (_, writer) = s.app.api_key(&s.owner, &s.ws, json!({ "scopes": ["widget:write"] })).await;
    let (_, reader) = s.app.api_key(&s.owner, &s.ws, json!({ "scopes": ["widget:read"] })).await;
    let input = json!({ "agentId": s.agent, "origin": SHOP });
    assert_ok("widgets/verify", &s.app.op("widgets/verify", &writer, None, input.clone()).await);
    assert_problem(&s.app.op("widgets/verify", &reader, None, input).await, 403, "permission_denied");
    assert_eq!(s.conversations().await, 3);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_spent_quota_stops_verify_and_the_public_alike(pool: PgPool) {
    let s = setup(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "trial", &["conversations=2".to_owned()]).await.unwrap();
    assert_ok("widgets/verify", &s.verify(SHOP).await);
    assert_eq!(s.ask(Some(SHOP), "Delivery to Canada?").await.status, 200);
    let body = assert_problem(&s.verify(SHOP).await, 403, "entitlement_required");
    assert_eq!(body["error"]["details"]["reason"], "quota_spent");
    let refused = s.ask(Some(SHOP), "Delivery to Canada?").await;
    let body = assert_problem(&refused, 403, "entitlement_required");
    assert_eq!(body["error"]["details"]["reason"], "quota_spent");
    assert_eq!(refused.header("access-control-allow-origin"), Some(SHOP), "the widget may read why");
    assert_eq!(s.conversations().await, 2, "nothing counted past the quota");
    assert_eq!(s.app.count("SELECT count(*) FROM conversations").await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_askers_never_spend_more_than_the_quota(pool: PgPool) {
    let s = setup(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "trial", &["conversations=3".to_owned()]).await.unwrap();
    let agent = s.agent.clone();
    let responses = s
        .app
        .concurrently(10, move |app, i| {
            let agent = agent.clone();
            async move {
                let ip = format!("192.0.2.{i}");
                let request = Request::builder()
                    .method("POST")
                    .uri(format!("/api/public/chat/{agent}/answers"))
                    .header("origin", SHOP)
                    .header("x-forwarded-for", ip)
                    .body(Body::from(json!({ "question": "Delivery?" }).to_string()))
                    .unwrap();
                app.send(request).await
            }
        })
        .await;
    let answered = responses.iter().filter(|r| r.status == 200).count();
    assert_eq!(answered, 3, "{:?}", responses.iter().map(|r| r.status).collect::<Vec<_>>());
    assert!(responses.iter().all(|r| r.status == 200 || r.status == 403));
    assert_eq!(s.conversations().await, 3);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_model_that_is_down_fails_the_answer_check_and_gives_the_conversation_back(pool: PgPool) {
    let model = llm::start(vec![Reply::Status(503)]).await;
    let config =
        ServeConfig { llm_base_url: Some(model.base_url.clone()), llm_model: Some("stand-in".to_owned()), ..config() };
    let s = setup_with(pool, config).await;
    let body = assert_problem(&s.verify(SHOP).await, 422, "processing_failed");
    assert_eq!(body["error"]["details"]["checks"], checks_failing(&["answer"]));
    assert_eq!(body["error"]["details"]["reason"], "model_unavailable");
    assert_eq!(model.requests().len(), 2, "asked twice (one retry)");
    assert_eq!(s.conversations().await, 0, "an unanswered conversation is given back");
    assert_eq!(s.app.count("SELECT count(*) FROM conversations").await, 0);
    // The public endpoint: the same failure, nothing spent, and nothing about
    // the operator's model told to the public (its status, its address).
    let body = assert_problem(&s.ask(Some(SHOP), "Delivery to Canada?").await, 422, "processing_failed");
    assert_eq!(body["error"]["details"], serde_json::json!({ "reason": "model_unavailable" }));
    assert!(!body.to_string().contains("503"), "{body}");
    assert_eq!(s.conversations().await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn an_allowed_origin_gets_an_answer_with_its_sources_and_cors(pool: PgPool) {
    let s = setup(pool).await;
    let response = s.ask(Some(SHOP), "How long does delivery to Canada take?").await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(response.header("vary"), Some("Origin"));
    assert!(response.header("x-request-id").is_some_and(|id| id.starts_with("req_")));
    let body = response.json();
    assert!(body["answer"].as_str().unwrap().contains("three to five business days"), "{body}");
    assert_eq!(
        body["sources"],
        json!([{ "sourceId": s.source, "title": "Title of shipping", "uri": "https://git.example/shipping.md" }])
    );
    let conversation = body["conversationId"].as_str().unwrap().to_owned();
    assert!(conversation.starts_with("conv_"), "{conversation}");
    assert_eq!(s.conversations().await, 1);

    // The same conversation continues uncounted; an unknown one starts anew.
    let again = json!({ "question": "Is shipping free?", "conversationId": conversation });
    let body = s.ask_agent(&s.agent, Some(SHOP), &[], again).await.json();
    assert_eq!(body["conversationId"], conversation.as_str());
    assert_eq!(s.conversations().await, 1);
    let unknown =
        json!({ "question": "Is shipping free?", "conversationId": svc_core::ids::ConversationId::new().to_string() });
    let body = s.ask_agent(&s.agent, Some(SHOP), &[], unknown).await.json();
    assert_ne!(body["conversationId"], conversation.as_str());
    assert_eq!(s.conversations().await, 2);

    // The Public Chat page's own origin is answered too.
    let response = s.ask(Some(BASE_URL), "Is shipping free?").await;
    assert_eq!(response.status, 200, "{}", response.text());
    // Nothing matches: a short "don't know", no sources.
    let body = s.ask(Some(SHOP), "quantum chromodynamics").await.json();
    assert_eq!(body["sources"], json!([]));
    assert!(body["answer"].as_str().unwrap().contains("don't know"), "{body}");
}

#[sqlx::test(migrations = "../migrations")]
async fn other_origins_are_refused_without_a_cors_grant(pool: PgPool) {
    let s = setup(pool).await;
    for origin in [
        None,
        Some("https://other.example"),
        Some("https://shop.example/"),
        Some("https://shop.example:8443"),
        // Forms no browser sends: matching is exact.
        Some("https://shop.example:443"),
        Some("HTTPS://Shop.Example"),
        Some("http://shop.example"),
        Some("https://sub.shop.example"),
        Some("null"),
        Some(""),
    ] {
        let response = s.ask(origin, "Delivery?").await;
        let body = assert_problem(&response, 403, "permission_denied");
        assert_eq!(body["error"]["details"]["reason"], "origin_not_allowed");
        assert_eq!(response.header("access-control-allow-origin"), None, "{origin:?}");
    }
    assert_eq!(s.conversations().await, 0);
    // Preflights: granted to the allowed origin only.
    let preflight = |origin: &'static str| {
        Request::builder()
            .method("OPTIONS")
            .uri(format!("/api/public/chat/{}/answers", s.agent))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .body(Body::empty())
            .unwrap()
    };
    let granted = s.app.send(preflight(SHOP)).await;
    assert_eq!(granted.status, 204);
    assert_eq!(granted.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(granted.header("access-control-allow-methods"), Some("POST"));
    assert_eq!(granted.header("access-control-allow-headers"), Some("content-type"));
    assert!(granted.header("access-control-max-age").is_some());
    let refused = s.app.send(preflight("https://other.example")).await;
    assert_problem(&refused, 403, "permission_denied");
    assert_eq!(refused.header("access-control-allow-origin"), None);
    // Other methods: 405.
    let get = s.get(&format!("/api/public/chat/{}/answers", s.agent)).await;
    assert_eq!(get.status, 405);
}

#[sqlx::test(migrations = "../migrations")]
async fn each_client_has_its_own_rate_limit(pool: PgPool) {
    let config =
        ServeConfig { public_answers_per_minute: 2, client_ip_header: Some("x-forwarded-for".to_owned()), ..config() };
    let s = setup_with(pool, config).await;
    let from = |ip: &'static str| [("x-forwarded-for", ip)];
    let question = || json!({ "question": "Delivery?" });
    for _ in 0..2 {
        let response = s.ask_agent(&s.agent, Some(SHOP), &from("198.51.100.7"), question()).await;
        assert_eq!(response.status, 200, "{}", response.text());
    }
    let limited = s.ask_agent(&s.agent, Some(SHOP), &from("198.51.100.7"), question()).await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    assert_eq!(limited.json()["error"]["details"]["reason"], "rate_limited");
    let wait: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "one answer every 30 seconds: {wait}");
    assert_eq!(limited.header("access-control-allow-origin"), Some(SHOP), "the widget may read Retry-After");
    // The proxy's rightmost address is the client: another one is not limited.
    let other =
        s.ask_agent(&s.agent, Some(SHOP), &[("x-forwarded-for", "198.51.100.7, 203.0.113.9")], question()).await;
    assert_eq!(other.status, 200, "{}", other.text());
    assert_eq!(s.conversations().await, 3, "refused questions count nothing");
}

#[sqlx::test(migrations = "../migrations")]
async fn questions_are_checked_at_their_bounds(pool: PgPool) {
    let s = setup(pool).await;
    let ask = |body: Value| s.ask_agent(&s.agent, Some(SHOP), &[], body);
    let at_limit = ask(json!({ "question": "é".repeat(2000) })).await;
    assert_eq!(at_limit.status, 200, "{}", at_limit.text());
    for (body, path) in [
        (json!({ "question": "é".repeat(2001) }), "/question"),
        (json!({ "question": "" }), "/question"),
        (json!({ "question": 5 }), "/question"),
        (json!({}), ""),
        (json!({ "question": "q", "extra": 1 }), "/extra"),
        (json!({ "question": "q", "conversationId": "abc" }), "/conversationId"),
    ] {
        let response = ask(body.clone()).await;
        let problem = assert_problem(&response, 400, "invalid_request");
        assert_eq!(problem["error"]["details"]["issues"][0]["path"], path, "{body}");
        assert_eq!(response.header("access-control-allow-origin"), Some(SHOP));
    }
    let response = ask(json!("just text")).await;
    assert_problem(&response, 400, "invalid_request");
    assert_eq!(s.conversations().await, 1, "only the valid question was counted");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_chat_page_is_served_while_public_chat_is_enabled(pool: PgPool) {
    let s = setup(pool).await;
    s.ok("agents/configure", json!({ "agentId": s.agent, "name": "Help <script>alert(1)</script>" })).await;
    let page = s.get(&format!("/chat/{}", s.agent)).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let csp = page.header("content-security-policy").unwrap();
    for directive in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let html = page.text();
    assert!(html.contains(r#"<html lang="en">"#));
    assert!(html.contains(r#"<script src="assets/widget.js" defer></script>"#));
    assert!(html.contains(r#"<link rel="icon" href="assets/icon.svg""#));
    assert!(html.contains("Help &lt;script&gt;alert(1)&lt;/script&gt;"), "names are escaped");
    assert!(!html.contains("<script>alert"), "no markup from the tenant");
    assert!(!html.contains("onclick") && !html.contains("style="), "nothing inline the policy would block");
    // The Widget's configuration, as data for the page's script: its public parts only.
    let data = html.split(r#"<script type="application/json" id="svc-chat-data">"#).nth(1).unwrap();
    let data: Value = serde_json::from_str(data.split("</script>").next().unwrap()).unwrap();
    assert_eq!(data["agentId"], s.agent.as_str());
    assert_eq!(data["appearance"]["headline"], "Helper");
    assert!(data.get("behavior").is_none() && data.get("allowedOrigins").is_none(), "{data}");
    for (path, kind) in [
        ("/chat/assets/widget.js", "text/javascript"),
        ("/chat/assets/chat.css", "text/css"),
        ("/chat/assets/icon.svg", "image/svg+xml"),
        ("/favicon.ico", "image/svg+xml"),
    ] {
        let asset = s.get(path).await;
        assert_eq!(asset.status, 200, "{path}");
        assert!(asset.header("content-type").unwrap().starts_with(kind), "{path}");
    }
    // The Widget's look and words: its language, headline, and a logo the policy admits.
    s.ok(
        "widgets/configure",
        json!({ "agentId": s.agent, "configuration": {
            "defaultLanguage": "es",
            "appearance": { "headline": "Ayuda <b>", "logoUrl": "https://cdn.example/logo.png", "theme": "dark" },
            "behavior": { "instructions": "PRIVATE", "predefinedQuestions": [{ "question": "¿Envíos?" }] },
        } }),
    )
    .await;
    let page = s.get(&format!("/chat/{}", s.agent)).await;
    let csp = page.header("content-security-policy").unwrap().to_owned();
    assert!(csp.contains("img-src 'self' https://cdn.example;"), "{csp}");
    let html = page.text();
    assert!(html.contains(r#"<html lang="es">"#) && html.contains(r#"<body class="dark">"#), "{html}");
    assert!(html.contains("Ayuda &lt;b&gt;") && html.contains("¿Envíos?"), "{html}");
    assert!(!html.contains("PRIVATE"), "{html}");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_disabled_chat_or_archived_workspace_answers_nothing(pool: PgPool) {
    let s = setup(pool).await;
    let page = format!("/chat/{}", s.agent);
    let refused = |response: &TestResponse| {
        assert_problem(response, 404, "resource_not_found");
        assert_eq!(response.header("access-control-allow-origin"), None);
    };
    let not_a_page = |response: TestResponse| {
        assert_eq!(response.status, 404);
        assert_eq!(response.header("content-type"), Some("text/html; charset=utf-8"));
        assert!(response.header("content-security-policy").is_some());
    };

    s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    refused(&s.ask(Some(SHOP), "Delivery?").await);
    not_a_page(s.get(&page).await);
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    assert_eq!(s.ask(Some(SHOP), "Delivery?").await.status, 200);

    svc_core::admin::set_archived(&s.app.pool, &s.ws, true).await.unwrap();
    refused(&s.ask(Some(SHOP), "Delivery?").await);
    not_a_page(s.get(&page).await);
    assert_problem(&s.verify(SHOP).await, 409, "workspace_archived");
    svc_core::admin::set_archived(&s.app.pool, &s.ws, false).await.unwrap();

    svc_core::admin::plan_set(&s.app.pool, &s.ws, "expired", &[]).await.unwrap();
    refused(&s.ask(Some(SHOP), "Delivery?").await);
    not_a_page(s.get(&page).await);

    // Unknown and deleted Agents.
    refused(&s.ask_agent("agent_nope", Some(SHOP), &[], json!({ "question": "q" })).await);
    not_a_page(s.get("/chat/agent_nope").await);
    assert_eq!(s.conversations().await, 1);
}
