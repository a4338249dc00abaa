//! Public Chat and the Widget configuration (contract §12): the lifecycle and
//! its confirmation, the stable URL, the default and merged configuration,
//! origins, the integration manifest, and what the public side reads.

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::chat::{Origin, public_agent};
use svc_core::ids::AgentId;
use svc_tests::http::TestResponse;

use crate::helpers::{BASE_URL, Tenant, assert_ok, assert_problem};

type Setup = Tenant;

async fn setup(pool: PgPool) -> Setup {
    Tenant::new(pool).await
}

impl Tenant {
    async fn public_chat(&self) -> Value {
        self.ok("public-chats/inspect", json!({ "agentId": self.agent })).await["publicChat"].clone()
    }

    async fn widget(&self) -> Value {
        self.ok("widgets/inspect", json!({ "agentId": self.agent })).await["configuration"].clone()
    }

    async fn configure(&self, configuration: Value) -> TestResponse {
        self.call("widgets/configure", json!({ "agentId": self.agent, "configuration": configuration })).await
    }

    async fn configured(&self, configuration: Value) -> Value {
        assert_ok("widgets/configure", &self.configure(configuration).await)["configuration"].clone()
    }

    async fn origins(&self, origins: &[&str], confirm: &[&str]) -> TestResponse {
        self.configure(json!({ "allowedOrigins": origins, "confirmRemovedOrigins": confirm })).await
    }

    fn url(&self) -> String {
        format!("{BASE_URL}/chat/{}", self.agent)
    }
}

/// The default configuration of an Agent named `name` speaking `language`.
fn default_configuration(name: &str, language: &str) -> Value {
    let greeting = match language {
        "es" => "¡Hola! ¿En qué puedo ayudarte hoy?",
        _ => "Hi! How can I help you today?",
    };
    json!({
        "allowedOrigins": [],
        "legacyAllowedDomains": [],
        "legacyAllowsAnyOrigin": false,
        "showBranding": true,
        "defaultLanguage": language,
        "website": null,
        "appearance": {
            "headline": name,
            "description": "",
            "welcomeMessage": greeting,
            "brandColor": "#2563eb",
            "theme": "auto",
            "orientation": "right",
            "logoUrl": "",
            "bubbleStyle": "icon",
            "bubbleLabel": null,
            "useBrandColor": true,
        },
        "behavior": {
            "instructions": "",
            "conversationTemperature": 0.2,
            "conversationCreativity": 0.2,
            "welcomePopup": { "enabled": false, "seconds": 5.0, "message": greeting },
            "collectUserInfo": { "enabled": false, "message": "" },
            "leadCapture": {
                "enabled": false,
                "contactEmail": "",
                "calendarLink": "",
                "phoneNumber": "",
                "customMessage": "",
                "emailNotificationEnabled": false,
            },
            "predefinedQuestions": [],
        },
    })
}

fn reason_of(body: &Value) -> (&str, &str) {
    let details = &body["error"]["details"];
    (details["reason"].as_str().unwrap_or_default(), details["rule"].as_str().unwrap_or_default())
}

#[sqlx::test(migrations = "../migrations")]
async fn enable_and_disable_with_exact_id_confirmation(pool: PgPool) {
    let s = setup(pool).await;
    let fresh = json!({ "agentId": s.agent, "enabled": false, "url": s.url(), "website": null });
    assert_eq!(s.public_chat().await, fresh, "a fresh Agent's Public Chat is disabled");
    assert_eq!(s.app.count("SELECT count(*) FROM public_chats").await, 0, "reading wrote nothing");

    let enabled = s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    assert_eq!(enabled["publicChat"], json!({ "agentId": s.agent, "enabled": true, "url": s.url(), "website": null }));
    let website = "https://Acme.example/Help?from=chat";
    let enabled = s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": website })).await;
    assert_eq!(enabled["publicChat"]["website"], website, "stored as given");
    let again = s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    assert_eq!(again["publicChat"]["website"], website, "an omitted website is kept");
    assert_eq!(s.public_chat().await, again["publicChat"]);

    let other = s.app.agent(&s.owner, &s.ws, "Other").await;
    let prefix = &s.agent[..s.agent.len() - 1];
    let upper = s.agent.to_uppercase();
    for confirm in [None, Some(other.as_str()), Some(prefix), Some(upper.as_str()), Some("yes")] {
        let mut input = json!({ "agentId": s.agent });
        if let Some(confirm) = confirm {
            input["confirm"] = confirm.into();
        }
        let body = assert_problem(&s.call("public-chats/disable", input).await, 428, "confirmation_required");
        assert_eq!(body["error"]["details"]["agentId"], s.agent, "{confirm:?}");
        assert_eq!(s.public_chat().await["enabled"], true, "{confirm:?} changed nothing");
    }
    assert_problem(
        &s.call("public-chats/disable", json!({ "agentId": s.agent, "confirm": true })).await,
        400,
        "invalid_request",
    );

    let disabled = s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    assert_eq!(
        disabled["publicChat"],
        json!({ "agentId": s.agent, "enabled": false, "url": s.url(), "website": website }),
        "disabling keeps the website"
    );
    assert_eq!(s.public_chat().await, disabled["publicChat"]);
    // Disabling what is disabled is no error.
    let still = s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    assert_eq!(still["publicChat"]["enabled"], false);
    // null clears the website.
    let cleared = s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": null })).await;
    assert_eq!(
        (cleared["publicChat"]["enabled"].clone(), cleared["publicChat"]["website"].clone()),
        (json!(true), Value::Null)
    );
    // The other Agent was never touched.
    let untouched = s.ok("public-chats/inspect", json!({ "agentId": other })).await;
    assert_eq!(untouched["publicChat"]["enabled"], false);
    // Confirmation is checked before existence.
    let unknown = "agt_00000000000000000000000000";
    assert_problem(&s.call("public-chats/disable", json!({ "agentId": unknown })).await, 428, "confirmation_required");
    assert_problem(
        &s.call("public-chats/disable", json!({ "agentId": unknown, "confirm": unknown })).await,
        404,
        "resource_not_found",
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn the_url_is_stable_across_rename_disable_and_enable(pool: PgPool) {
    let s = setup(pool).await;
    let url_of = |data: &Value| data["url"].as_str().unwrap().to_owned();
    let first = s.ok("public-chats/url", json!({ "agentId": s.agent })).await;
    assert_eq!(first, json!({ "agentId": s.agent, "url": s.url() }));
    s.ok("public-chats/enable", json!({ "agentId": s.agent })).await;
    s.ok("agents/configure", json!({ "agentId": s.agent, "name": "Renamed helper" })).await;
    s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": "https://example.com" })).await;
    for data in [
        s.ok("public-chats/url", json!({ "agentId": s.agent })).await,
        s.public_chat().await,
        s.ok("widgets/manifest", json!({ "agentId": s.agent })).await["publicChat"].clone(),
    ] {
        assert_eq!(url_of(&data), s.url());
    }
    // Another Agent has another URL.
    let other = s.app.agent(&s.owner, &s.ws, "Other").await;
    let theirs = s.ok("public-chats/url", json!({ "agentId": other })).await;
    assert_eq!(url_of(&theirs), format!("{BASE_URL}/chat/{other}"));
}

#[sqlx::test(migrations = "../migrations")]
async fn websites_must_be_absolute_http_urls(pool: PgPool) {
    let s = setup(pool).await;
    for (website, rule) in [
        ("example.com", "not_http"),
        ("/help", "not_http"),
        ("ftp://example.com", "not_http"),
        ("https:example.com", "not_http"),
        ("https://", "malformed"),
        ("https://exa mple.com", "whitespace"),
        ("https://user:secret@example.com", "userinfo"),
    ] {
        let body = assert_problem(
            &s.call("public-chats/enable", json!({ "agentId": s.agent, "website": website })).await,
            400,
            "invalid_request",
        );
        assert_eq!(reason_of(&body), ("invalid_url", rule), "{website}");
        assert_eq!(body["error"]["details"]["path"], "/website");
        let body = assert_problem(&s.configure(json!({ "website": website })).await, 400, "invalid_request");
        assert_eq!(reason_of(&body), ("invalid_url", rule), "{website}");
        assert_eq!(body["error"]["details"]["path"], "/configuration/website");
    }
    assert_eq!(s.app.count("SELECT count(*) FROM public_chats").await, 0, "nothing was written");
    assert_eq!(s.app.count("SELECT count(*) FROM widget_configurations").await, 0);

    let longest = format!("https://example.com/{}", "a".repeat(2000 - 20));
    let data = s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": longest })).await;
    assert_eq!(data["publicChat"]["website"], longest);
    assert_eq!(s.configured(json!({ "website": longest })).await["website"], longest);
    let too_long = format!("{longest}a");
    for response in [
        s.call("public-chats/enable", json!({ "agentId": s.agent, "website": too_long })).await,
        s.configure(json!({ "website": too_long })).await,
    ] {
        assert_problem(&response, 400, "invalid_request");
    }
    // The Widget's website is its own, apart from the Public Chat's.
    assert_eq!(s.configured(json!({ "website": null })).await["website"], Value::Null);
    assert_eq!(s.public_chat().await["website"], longest);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_fresh_agent_has_the_full_default_configuration(pool: PgPool) {
    let s = setup(pool).await;
    assert_eq!(s.widget().await, default_configuration("Helper", "en"));
    let spanish = assert_ok(
        "agents/create",
        &s.call("agents/create", json!({ "name": "Ayudante", "defaultLanguage": "es" })).await,
    )["agent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let data = s.ok("widgets/inspect", json!({ "agentId": spanish })).await;
    assert_eq!(data, json!({ "agentId": spanish, "configuration": default_configuration("Ayudante", "es") }));
    assert_eq!(s.app.count("SELECT count(*) FROM widget_configurations").await, 0, "computed, not written");
    // Until it is configured, the default follows the Agent.
    s.ok("agents/configure", json!({ "agentId": s.agent, "name": "Renamed", "defaultLanguage": "es" })).await;
    assert_eq!(s.widget().await, default_configuration("Renamed", "es"));
    // The first configure stores the whole configuration; later Agent changes
    // no longer touch it.
    let configured = s.configured(json!({ "showBranding": false })).await;
    let mut expected = default_configuration("Renamed", "es");
    expected["showBranding"] = false.into();
    assert_eq!(configured, expected);
    s.ok("agents/configure", json!({ "agentId": s.agent, "name": "Again", "defaultLanguage": "en" })).await;
    assert_eq!(s.widget().await, expected);
}

#[sqlx::test(migrations = "../migrations")]
async fn partial_configures_keep_every_other_field(pool: PgPool) {
    let s = setup(pool).await;
    let mut expected = default_configuration("Helper", "en");
    let steps = [
        json!({ "appearance": { "theme": "dark" } }),
        json!({ "appearance": { "bubbleLabel": "Ask us", "brandColor": "#A1b2C3", "logoUrl": "https://cdn.example/logo.svg" } }),
        json!({ "behavior": { "leadCapture": { "contactEmail": "sales@acme.example", "enabled": true } } }),
        json!({ "behavior": { "welcomePopup": { "seconds": 12 } } }),
        json!({ "behavior": { "predefinedQuestions": [{ "question": "Prices?", "order": 2 }, { "question": "Hours?" }] } }),
        json!({ "behavior": { "predefinedQuestions": [{ "question": "Returns?" }] } }),
        json!({ "website": "https://acme.example", "defaultLanguage": "es", "showBranding": false }),
        json!({ "appearance": { "bubbleLabel": null }, "behavior": { "collectUserInfo": { "message": "Your name?" } } }),
        json!({ "behavior": { "conversationTemperature": 1, "instructions": "Be brief." } }),
        json!({ "appearance": {}, "behavior": { "leadCapture": {} } }),
        json!({}),
    ];
    let changes: [&[(&str, Value)]; 11] = [
        &[("/appearance/theme", json!("dark"))],
        &[
            ("/appearance/bubbleLabel", json!("Ask us")),
            ("/appearance/brandColor", json!("#A1b2C3")),
            ("/appearance/logoUrl", json!("https://cdn.example/logo.svg")),
        ],
        &[
            ("/behavior/leadCapture/contactEmail", json!("sales@acme.example")),
            ("/behavior/leadCapture/enabled", json!(true)),
        ],
        &[("/behavior/welcomePopup/seconds", json!(12.0))],
        &[(
            "/behavior/predefinedQuestions",
            json!([{ "question": "Prices?", "order": 2.0 }, { "question": "Hours?" }]),
        )],
        &[("/behavior/predefinedQuestions", json!([{ "question": "Returns?" }]))],
        &[
            ("/website", json!("https://acme.example")),
            ("/defaultLanguage", json!("es")),
            ("/showBranding", json!(false)),
        ],
        &[("/appearance/bubbleLabel", Value::Null), ("/behavior/collectUserInfo/message", json!("Your name?"))],
        &[("/behavior/conversationTemperature", json!(1.0)), ("/behavior/instructions", json!("Be brief."))],
        &[],
        &[],
    ];
    for (step, changes) in steps.into_iter().zip(changes) {
        for (pointer, value) in changes {
            *expected.pointer_mut(pointer).unwrap() = value.clone();
        }
        assert_eq!(s.configured(step.clone()).await, expected, "after {step}");
        assert_eq!(s.widget().await, expected, "inspect after {step}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn configuration_bounds(pool: PgPool) {
    let s = setup(pool).await;
    let origins = |n: usize| (0..n).map(|i| format!("https://site{i}.example")).collect::<Vec<_>>();
    let passes = [
        json!({ "allowedOrigins": origins(50) }),
        json!({ "behavior": { "predefinedQuestions": vec![json!({ "question": "Q?" }); 4] } }),
        json!({ "behavior": { "welcomePopup": { "seconds": 0 } } }),
        json!({ "behavior": { "welcomePopup": { "seconds": 30 } } }),
        json!({ "behavior": { "conversationTemperature": 0, "conversationCreativity": 1 } }),
        json!({ "behavior": { "conversationTemperature": 1, "conversationCreativity": 0 } }),
        json!({ "appearance": { "brandColor": "#00ff7F" } }),
        json!({ "behavior": { "leadCapture": { "contactEmail": "", "calendarLink": "" } } }),
        json!({ "behavior": { "leadCapture": { "contactEmail": "a@b.example", "calendarLink": "https://cal.example/a" } } }),
    ];
    for configuration in passes {
        assert_ok("widgets/configure", &s.configure(configuration.clone()).await);
    }
    let stored = s.widget().await;
    let fails = [
        (json!({ "allowedOrigins": origins(51) }), "/configuration/allowedOrigins"),
        (
            json!({ "behavior": { "predefinedQuestions": vec![json!({ "question": "Q?" }); 5] } }),
            "/configuration/behavior/predefinedQuestions",
        ),
        (
            json!({ "behavior": { "predefinedQuestions": [{ "question": "" }] } }),
            "/configuration/behavior/predefinedQuestions/0/question",
        ),
        (json!({ "behavior": { "welcomePopup": { "seconds": -1 } } }), "/configuration/behavior/welcomePopup/seconds"),
        (
            json!({ "behavior": { "welcomePopup": { "seconds": 30.5 } } }),
            "/configuration/behavior/welcomePopup/seconds",
        ),
        (json!({ "behavior": { "conversationTemperature": 1.01 } }), "/configuration/behavior/conversationTemperature"),
        (json!({ "behavior": { "conversationCreativity": -0.1 } }), "/configuration/behavior/conversationCreativity"),
        (json!({ "appearance": { "brandColor": "#abc" } }), "/configuration/appearance/brandColor"),
        (json!({ "appearance": { "brandColor": "red" } }), "/configuration/appearance/brandColor"),
        (json!({ "appearance": { "brandColor": "#1234567" } }), "/configuration/appearance/brandColor"),
        (json!({ "appearance": { "theme": "neon" } }), "/configuration/appearance/theme"),
        (
            json!({ "behavior": { "leadCapture": { "contactEmail": "nope" } } }),
            "/configuration/behavior/leadCapture/contactEmail",
        ),
        (json!({ "legacyAllowedDomains": ["example.com"] }), "/configuration/legacyAllowedDomains"),
        (json!({ "legacyAllowsAnyOrigin": true }), "/configuration/legacyAllowsAnyOrigin"),
        (json!({ "showBranding": null }), "/configuration/showBranding"),
        (json!({ "appearance": { "extra": 1 } }), "/configuration/appearance/extra"),
    ];
    for (configuration, path) in fails {
        let body = assert_problem(&s.configure(configuration.clone()).await, 400, "invalid_request");
        let issues = body["error"]["details"]["issues"].as_array().unwrap();
        assert!(issues.iter().any(|i| i["path"] == path), "{configuration}: {issues:?}");
    }
    let body =
        assert_problem(&s.call("widgets/configure", json!({ "agentId": s.agent })).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/configuration");
    assert_eq!(s.widget().await, stored, "refused calls wrote nothing");
}

#[sqlx::test(migrations = "../migrations")]
async fn origins_are_normalised_deduplicated_and_refused_by_rule(pool: PgPool) {
    let s = setup(pool).await;
    let data = s
        .configured(json!({ "allowedOrigins": [
            "HTTPS://Shop.Example.COM:443",
            "https://shop.example.com",
            "http://localhost:3000",
            "http://127.0.0.1:80",
            "https://bücher.example",
            "https://[2001:DB8::0:1]:8443",
        ] }))
        .await;
    let normalised = json!([
        "https://shop.example.com",
        "http://localhost:3000",
        "http://127.0.0.1",
        "https://xn--bcher-kva.example",
        "https://[2001:db8::1]:8443"
    ]);
    assert_eq!(data["allowedOrigins"], normalised);
    for (origin, rule) in [
        ("", "empty"),
        ("shop.example.com", "missing_scheme"),
        ("ftp://shop.example.com", "unsupported_scheme"),
        ("http://shop.example.com", "insecure_scheme"),
        ("https://user@shop.example.com", "userinfo"),
        ("https://*.example.com", "wildcard"),
        ("https://shop.example.com/", "trailing_slash"),
        ("https://shop.example.com/app", "path"),
        ("https://shop.example.com?a=1", "query"),
        ("https://shop.example.com#x", "fragment"),
        ("https://shop..example.com", "invalid_host"),
        ("https://shop.example.com:70000", "invalid_port"),
        (" https://shop.example.com", "whitespace"),
    ] {
        let input = json!({ "allowedOrigins": ["https://a.example", "https://b.example", origin] });
        let body = assert_problem(&s.configure(input).await, 400, "invalid_request");
        assert_eq!(reason_of(&body), ("invalid_origin", rule), "{origin:?}");
        assert_eq!(body["error"]["details"]["index"], 2, "{origin:?}");
        assert_eq!(body["error"]["details"]["path"], "/configuration/allowedOrigins/2");
        assert!(!body["error"]["message"].as_str().unwrap().contains("shop"), "the value is not echoed");
    }
    // An entry of confirmRemovedOrigins is held to the same rules.
    let body = assert_problem(
        &s.configure(json!({ "confirmRemovedOrigins": ["https://ok.example", "https://x.example/"] })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["path"], "/configuration/confirmRemovedOrigins/1");
    assert_eq!(s.widget().await["allowedOrigins"], normalised, "refused calls wrote nothing");
}

#[sqlx::test(migrations = "../migrations")]
async fn removing_origins_needs_each_one_confirmed(pool: PgPool) {
    let s = setup(pool).await;
    let (a, b, c) = ("https://a.example", "https://b.example", "https://c.example");
    assert_ok("widgets/configure", &s.origins(&[a, b], &[]).await);
    // Adding needs no confirmation, and neither does a patch without the list.
    assert_ok("widgets/configure", &s.origins(&[a, b, c], &[]).await);
    assert_eq!(s.configured(json!({ "showBranding": false })).await["allowedOrigins"], json!([a, b, c]));

    let body = assert_problem(&s.origins(&[a], &[]).await, 428, "confirmation_required");
    assert_eq!(body["error"]["details"]["removedOrigins"], json!([b, c]));
    assert_eq!(body["error"]["details"]["unconfirmedOrigins"], json!([b, c]));
    let body = assert_problem(&s.origins(&[a], &["https://B.example:443"]).await, 428, "confirmation_required");
    assert_eq!(body["error"]["details"]["removedOrigins"], json!([b, c]));
    assert_eq!(body["error"]["details"]["unconfirmedOrigins"], json!([c]));
    // Confirming an origin that stays is no confirmation of one that goes.
    assert_problem(&s.origins(&[a, b], &[a]).await, 428, "confirmation_required");
    assert_eq!(s.widget().await["allowedOrigins"], json!([a, b, c]), "nothing removed");

    // Another writing of a kept origin removes nothing.
    assert_ok("widgets/configure", &s.origins(&["HTTPS://A.EXAMPLE", "https://b.example:443", c], &[]).await);
    // Complete confirmation, in any writing and order, with an extra one.
    let done = s.origins(&[a], &["https://C.example", b, "https://never-listed.example"]).await;
    assert_eq!(assert_ok("widgets/configure", &done)["configuration"]["allowedOrigins"], json!([a]));
    // Emptying the list removes the last one, confirmed.
    assert_problem(&s.origins(&[], &[]).await, 428, "confirmation_required");
    assert_eq!(
        assert_ok("widgets/configure", &s.origins(&[], &[a]).await)["configuration"]["allowedOrigins"],
        json!([])
    );
}

/// What the answers side reads: one lookup by Agent id alone, with exact
/// origin matching.
#[sqlx::test(migrations = "../migrations")]
async fn the_public_side_reads_the_state_by_agent_id(pool: PgPool) {
    let s = setup(pool).await;
    let id = AgentId::parse(&s.agent).unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    let fresh = public_agent(&mut conn, id).await.unwrap().unwrap();
    assert_eq!(fresh.workspace_id().to_string(), s.ws);
    assert!(!fresh.public_chat_enabled && !fresh.is_archived());
    assert_eq!((fresh.website.clone(), fresh.allowed_origins.clone()), (None, vec![]));
    assert_eq!(serde_json::to_value(&fresh.widget).unwrap(), default_configuration("Helper", "en"));
    assert_eq!(fresh.agent.name, "Helper");

    s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": "https://acme.example" })).await;
    s.configured(json!({ "allowedOrigins": ["https://App.acme.example", "http://localhost:3000"] })).await;
    let state = public_agent(&mut conn, id).await.unwrap().unwrap();
    assert!(state.public_chat_enabled);
    assert_eq!(state.website.as_deref(), Some("https://acme.example"));
    assert_eq!(
        state.allowed_origins,
        vec![Origin::parse("https://app.acme.example").unwrap(), Origin::parse("http://localhost:3000").unwrap()]
    );
    for header in ["https://app.acme.example", "https://APP.acme.example:443", "http://localhost:3000"] {
        assert!(state.allows_origin(&Origin::parse(header).unwrap()), "{header}");
    }
    for header in [
        "https://acme.example",
        "https://evil.app.acme.example",
        "https://app.acme.example:8443",
        "http://localhost:3001",
        "http://localhost",
        "https://app.acme.example.evil.example",
    ] {
        assert!(!state.allows_origin(&Origin::parse(header).unwrap()), "{header}");
    }
    for header in ["null", "https://app.acme.example/", ""] {
        assert!(Origin::parse(header).is_err(), "{header}");
    }

    svc_core::admin::set_archived(&s.app.pool, &s.ws, true).await.unwrap();
    assert!(public_agent(&mut conn, id).await.unwrap().unwrap().is_archived());
    svc_core::admin::set_archived(&s.app.pool, &s.ws, false).await.unwrap();

    // A deleted Agent is gone, its stored state with it.
    s.ok("agents/delete", json!({ "agentId": s.agent, "confirm": true })).await;
    assert!(public_agent(&mut conn, id).await.unwrap().is_none());
    assert_eq!(s.app.count("SELECT count(*) FROM public_chats").await, 0);
    assert_eq!(s.app.count("SELECT count(*) FROM widget_configurations").await, 0);
    assert!(public_agent(&mut conn, AgentId::new()).await.unwrap().is_none());
}

#[sqlx::test(migrations = "../migrations")]
async fn the_manifest_holds_what_an_embedding_needs_and_no_secret(pool: PgPool) {
    let s = setup(pool).await;
    s.app.api_key(&s.owner, &s.ws, json!({ "preset": "operator" })).await;
    s.ok("public-chats/enable", json!({ "agentId": s.agent, "website": "https://acme.example" })).await;
    let configuration = s.configured(json!({ "allowedOrigins": ["https://acme.example"] })).await;
    let workspace = s.ok("workspaces/inspect", json!({})).await["workspace"].clone();
    let agent = s.ok("agents/inspect", json!({ "agentId": s.agent })).await["agent"].clone();
    let response = s.call("widgets/manifest", json!({ "agentId": s.agent })).await;
    let manifest = assert_ok("widgets/manifest", &response);
    assert_eq!(
        manifest,
        json!({
            "workspace": { "id": s.ws, "slug": workspace["slug"] },
            "agent": { "id": s.agent, "slug": agent["slug"] },
            "package": { "packageName": "svc-widget-react", "version": "2.0.5", "component": "SvcChat", "agentIdProp": "embedId" },
            "configuration": configuration,
            "publicChat": s.public_chat().await,
        })
    );
    assert_eq!(manifest["agent"]["slug"], "helper");
    assert!(!response.text().contains("svck_"), "no key material");
}

#[sqlx::test(migrations = "../migrations")]
async fn another_workspaces_or_a_deleted_agent_is_not_found(pool: PgPool) {
    let s = setup(pool).await;
    let (mallory, _) = s.app.owner("mallory").await;
    let cases = |agent: &str| {
        [
            ("public-chats/inspect", json!({ "agentId": agent })),
            ("public-chats/enable", json!({ "agentId": agent })),
            ("public-chats/disable", json!({ "agentId": agent, "confirm": agent })),
            ("public-chats/url", json!({ "agentId": agent })),
            ("widgets/inspect", json!({ "agentId": agent })),
            ("widgets/configure", json!({ "agentId": agent, "configuration": { "showBranding": false } })),
            ("widgets/manifest", json!({ "agentId": agent })),
        ]
    };
    for (path, input) in cases(&s.agent) {
        assert_problem(&s.app.op(path, &mallory.token, None, input).await, 404, "resource_not_found");
    }
    for (path, input) in cases("agt_1").into_iter().chain(cases("not-an-id")) {
        assert_problem(&s.call(path, input).await, 404, "resource_not_found");
    }
    assert_eq!(s.app.count("SELECT count(*) FROM public_chats").await, 0, "nothing written for anyone");
    assert_eq!(s.app.count("SELECT count(*) FROM widget_configurations").await, 0);

    for (path, input) in cases(&s.agent) {
        assert_ok(path, &s.call(path, input).await);
    }
    s.ok("agents/delete", json!({ "agentId": s.agent, "confirm": true })).await;
    for (path, input) in cases(&s.agent) {
        assert_problem(&s.call(path, input).await, 404, "resource_not_found");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn an_archived_workspace_refuses_reads_and_writes(pool: PgPool) {
    let s = setup(pool).await;
    let (_, secret) = s.app.api_key(&s.owner, &s.ws, json!({ "preset": "operator" })).await;
    let cases = [
        ("public-chats/inspect", json!({ "agentId": s.agent })),
        ("public-chats/enable", json!({ "agentId": s.agent })),
        ("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })),
        ("public-chats/url", json!({ "agentId": s.agent })),
        ("widgets/inspect", json!({ "agentId": s.agent })),
        ("widgets/configure", json!({ "agentId": s.agent, "configuration": { "showBranding": false } })),
        ("widgets/manifest", json!({ "agentId": s.agent })),
    ];
    svc_core::admin::set_archived(&s.app.pool, &s.ws, true).await.unwrap();
    for (path, input) in &cases {
        assert_problem(&s.call(path, input.clone()).await, 409, "workspace_archived");
        assert_problem(&s.app.op(path, &secret, None, input.clone()).await, 409, "workspace_archived");
    }
    assert_eq!(s.app.count("SELECT count(*) FROM public_chats").await, 0);
    svc_core::admin::set_archived(&s.app.pool, &s.ws, false).await.unwrap();
    for (path, input) in cases {
        assert_ok(path, &s.call(path, input).await);
    }
}

/// Configures of different fields at once all land: each merges into what the
/// one before it stored.
#[sqlx::test(migrations = "../migrations")]
async fn concurrent_configures_lose_no_change(pool: PgPool) {
    let s = setup(pool).await;
    let changes = [
        json!({ "showBranding": false }),
        json!({ "appearance": { "theme": "dark" } }),
        json!({ "appearance": { "orientation": "left" } }),
        json!({ "appearance": { "bubbleStyle": "pill" } }),
        json!({ "appearance": { "description": "About us" } }),
        json!({ "behavior": { "instructions": "Be kind." } }),
        json!({ "behavior": { "welcomePopup": { "enabled": true } } }),
        json!({ "behavior": { "leadCapture": { "phoneNumber": "+34 600 000 000" } } }),
    ];
    let responses = s
        .app
        .concurrently(changes.len(), |app, i| {
            let (token, ws, agent, change) = (s.owner.token.clone(), s.ws.clone(), s.agent.clone(), changes[i].clone());
            async move {
                app.op("widgets/configure", &token, Some(&ws), json!({ "agentId": agent, "configuration": change }))
                    .await
            }
        })
        .await;
    for response in &responses {
        assert_ok("widgets/configure", response);
    }
    let c = s.widget().await;
    assert_eq!(c["showBranding"], false);
    assert_eq!(c["appearance"]["theme"], "dark");
    assert_eq!(c["appearance"]["orientation"], "left");
    assert_eq!(c["appearance"]["bubbleStyle"], "pill");
    assert_eq!(c["appearance"]["description"], "About us");
    assert_eq!(c["behavior"]["instructions"], "Be kind.");
    assert_eq!(c["behavior"]["welcomePopup"]["enabled"], true);
    assert_eq!(c["behavior"]["leadCapture"]["phoneNumber"], "+34 600 000 000");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_replayed_enable_answers_what_it_answered(pool: PgPool) {
    let s = setup(pool).await;
    let input = json!({ "agentId": s.agent, "website": "https://acme.example", "idempotencyKey": "enable-once-1" });
    let first = s.ok("public-chats/enable", input.clone()).await;
    s.ok("public-chats/disable", json!({ "agentId": s.agent, "confirm": s.agent })).await;
    let replay = s.call("public-chats/enable", input).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(assert_ok("public-chats/enable", &replay), first);
    assert_eq!(s.public_chat().await["enabled"], false, "the replay did not run again");
}
