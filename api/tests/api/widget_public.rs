//! The Widget's side of the public surface (contract §12): the public widget
//! configuration endpoint (what it shows, to whom, how its refusals read
//! cross-origin) and answers through the Widget, which use its instructions,
//! temperature, creativity and language.

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
const OTHER: &str = "https://other.example";

struct Setup {
    app: TestApp,
    owner: TestUser,
    ws: String,
    /// Public Chat enabled, [`SHOP`] allowed.
    agent: String,
}

async fn setup(config: ServeConfig, pool: PgPool) -> Setup {
    let app = TestApp::with_config(pool, config).await;
    let (owner, ws) = app.owner("alice").await;
    let agent = app.agent(&owner, &ws, "Helper").await;
    let s = Setup { app, owner, ws, agent };
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    s
}

impl Setup {
    async fn ok(&self, path: &str, input: Value) -> Value {
        assert_ok(path, &self.app.op(path, &self.owner.token, Some(&self.ws), input).await)
    }

    async fn configure(&self, configuration: Value) -> Value {
        self.ok("widgets/configure", json!({ "agentId": self.agent, "configuration": configuration })).await
    }

    async fn widget(&self, method: &str, origin: Option<&str>) -> TestResponse {
        let mut request = Request::builder().method(method).uri(format!("/api/public/chat/{}/widget", self.agent));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        self.app.send(request.body(Body::empty()).unwrap()).await
    }

    async fn ask(&self, question: &str) -> TestResponse {
        let request = Request::builder()
            .method("POST")
            .uri(format!("/api/public/chat/{}/answers", self.agent))
            .header("origin", SHOP)
            .header("content-type", "application/json")
            .body(Body::from(json!({ "question": question }).to_string()))
            .unwrap();
        self.app.send(request).await
    }
}

fn configured() -> Value {
    json!({
        "allowedOrigins": [SHOP],
        "defaultLanguage": "es",
        "showBranding": false,
        "appearance": { "headline": "Ayuda", "brandColor": "#ffd400", "theme": "dark", "bubbleStyle": "pill" },
        "behavior": {
            "instructions": "SECRET-INSTRUCTIONS: answer like a pirate.",
            "conversationTemperature": 0.9,
            "conversationCreativity": 0.35,
            "welcomePopup": { "enabled": true, "seconds": 4, "message": "¿Te ayudo?" },
            "predefinedQuestions": [{ "question": "¿Envíos?", "order": 2 }, { "question": "¿Horario?", "order": 1 }],
            "leadCapture": { "enabled": true, "contactEmail": "desk@shop.example", "emailNotificationEnabled": true },
        },
    })
}

#[sqlx::test(migrations = "../migrations")]
async fn an_allowed_origin_reads_the_public_parts_only(pool: PgPool) {
    let s = setup(config(), pool).await;
    let stored = s.configure(configured()).await["configuration"].clone();
    let response = s.widget("GET", Some(SHOP)).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(response.header("vary"), Some("Origin"));
    assert_eq!(response.header("cache-control"), Some("public, max-age=60"));
    assert!(response.header("x-request-id").is_some());
    let body = response.json();
    assert_eq!(
        body,
        json!({
            "agentId": s.agent,
            "defaultLanguage": "es",
            "showBranding": false,
            "appearance": stored["appearance"],
            "welcomePopup": { "enabled": true, "seconds": 4.0, "message": "¿Te ayudo?" },
            "predefinedQuestions": [{ "question": "¿Envíos?", "order": 2.0 }, { "question": "¿Horario?", "order": 1.0 }],
            "collectUserInfo": { "enabled": false, "message": "" },
            "leadCapture": {
                "enabled": true, "contactEmail": "desk@shop.example", "calendarLink": "", "phoneNumber": "",
                "customMessage": "",
            },
        })
    );
    let text = response.text();
    for private in ["SECRET-INSTRUCTIONS", "Temperature", "Creativity", "allowedOrigins", "emailNotification"] {
        assert!(!text.contains(private), "{private} is the Workspace's: {text}");
    }
    // The chat page's own origin is admitted too; an Agent never configured
    // shows its defaults.
    let fresh = s.app.agent(&s.owner, &s.ws, "Fresh").await;
    s.ok("public-chats/enable", json!({ "agentId": fresh })).await;
    let request = Request::builder().uri(format!("/api/public/chat/{fresh}/widget")).header("origin", BASE_URL);
    let response = s.app.send(request.body(Body::empty()).unwrap()).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["appearance"]["headline"], "Fresh");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_refusal_is_readable_by_the_refused_origin_and_says_nothing(pool: PgPool) {
    let s = setup(config(), pool).await;
    s.configure(configured()).await;
    for origin in [OTHER, "https://shop.example:8443", "http://shop.example", "null"] {
        let response = s.widget("GET", Some(origin)).await;
        let body = assert_problem(&response, 403, "permission_denied");
        assert_eq!(body["error"]["details"]["reason"], "origin_not_allowed");
        // The Widget must tell this from a network failure: granted, no data.
        assert_eq!(response.header("access-control-allow-origin"), Some(origin));
        assert_eq!(response.header("vary"), Some("Origin"));
        assert_eq!(response.header("cache-control"), Some("no-store"));
        assert!(!response.text().contains("Ayuda"), "{}", response.text());
    }
    // No Origin: refused, nothing to grant.
    let response = s.widget("GET", None).await;
    assert_problem(&response, 403, "permission_denied");
    assert_eq!(response.header("access-control-allow-origin"), None);
    // The answers endpoint keeps refusing with no grant.
    let request = Request::builder()
        .method("POST")
        .uri(format!("/api/public/chat/{}/answers", s.agent))
        .header("origin", OTHER)
        .body(Body::from(r#"{"question":"q"}"#))
        .unwrap();
    let refused = s.app.send(request).await;
    assert_problem(&refused, 403, "permission_denied");
    assert_eq!(refused.header("access-control-allow-origin"), None);
    // Only GET.
    let post = s.widget("POST", Some(SHOP)).await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET"));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_disabled_chat_or_unknown_agent_reads_as_not_found(pool: PgPool) {
    let s = setup(config(), pool).await;
    s.configure(configured()).await;
    s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    let response = s.widget("GET", Some(SHOP)).await;
    assert_problem(&response, 404, "resource_not_found");
    assert_eq!(response.header("access-control-allow-origin"), Some(SHOP));
    let request = Request::builder().uri("/api/public/chat/agt_nope/widget").header("origin", SHOP);
    assert_problem(&s.app.send(request.body(Body::empty()).unwrap()).await, 404, "resource_not_found");
}

/// Adds one source and processes it to active.
async fn knowledge(s: &Setup) {
    let content = "# Shipping\n\nWe ship to Canada. Delivery takes three to five business days.";
    let source =
        s.ok("knowledge-sources/add", add_input(&s.agent, "shipping", content)).await["knowledgeSource"].clone();
    let revision = RevisionId::parse(source["pendingRevision"]["id"].as_str().unwrap()).unwrap();
    process(&s.app.pool, revision, &processing("test")).await.unwrap();
}

#[sqlx::test(migrations = "../migrations")]
async fn answers_through_the_widget_use_its_behaviour(pool: PgPool) {
    let model = llm::start(vec![Reply::Content("Arr, three to five days.".into())]).await;
    let config =
        ServeConfig { llm_base_url: Some(model.base_url.clone()), llm_model: Some("stand-in".to_owned()), ..config() };
    let s = setup(config, pool).await;
    s.ok("agents/configure", json!({ "agentId": s.agent, "instructions": "AGENT-RULES", "temperature": 0.5 })).await;
    knowledge(&s).await;
    // Not configured yet: the Agent's own instructions and temperature.
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    let request = Request::builder()
        .method("POST")
        .uri(format!("/api/public/chat/{}/answers", s.agent))
        .header("origin", BASE_URL)
        .body(Body::from(json!({ "question": "Delivery to Canada?" }).to_string()))
        .unwrap();
    assert_eq!(s.app.send(request).await.status, 200);
    let (_, before) = model.requests().pop().unwrap();
    assert_eq!(before["temperature"], 0.5);
    assert!(before.get("top_p").is_none(), "{before}");
    assert!(before["messages"][0]["content"].as_str().unwrap().starts_with("AGENT-RULES\n\nAnswer in English"));

    s.configure(configured()).await;
    let response = s.ask("Delivery to Canada?").await;
    assert_eq!(response.status, 200, "{}", response.text());
    let (_, body) = model.requests().pop().unwrap();
    assert_eq!(body["temperature"], 0.9);
    assert_eq!(body["top_p"], 0.35);
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("AGENT-RULES\n\nSECRET-INSTRUCTIONS: answer like a pirate."), "{system}");
    assert!(system.contains("Answer in Spanish"), "the Widget's language: {system}");
    // widget.verify answers through the Widget too.
    assert_ok(
        "widgets/verify",
        &s.app.op("widgets/verify", &s.owner.token, Some(&s.ws), json!({ "agentId": s.agent, "origin": SHOP })).await,
    );
    let (_, verified) = model.requests().pop().unwrap();
    assert_eq!(verified["temperature"], 0.9);
}

#[sqlx::test(migrations = "../migrations")]
async fn without_a_model_the_widgets_language_answers(pool: PgPool) {
    let s = setup(config(), pool).await;
    knowledge(&s).await;
    s.configure(json!({ "allowedOrigins": [SHOP], "defaultLanguage": "es" })).await;
    let body = s.ask("quantum chromodynamics").await.json();
    assert!(body["answer"].as_str().unwrap().starts_with("Todavía no lo sé"), "{body}");
}
