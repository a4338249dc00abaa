//! The web application at `/account`: sign-in through a real OpenID Connect
//! flow (the development issuer, served by the same real connection loop),
//! the session cookie, CSRF, first-time setup, and the `setup_required`
//! problem naming the application.

use std::collections::HashMap;

use http::Method;
use serde_json::json;
use sqlx::PgPool;
use svc_api::config::ServeConfig;
use svc_api::{AppState, router};
use svc_tests::http::{HttpClient, TestResponse};
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestApp, assert_problem, config};

/// An API with the development issuer on a real loopback listener (the
/// sign-in's code exchange is an HTTP request to it). Its User is not set up.
struct Site {
    base: String,
    client: HttpClient,
    pool: PgPool,
    cookies: HashMap<String, String>,
}

impl Site {
    async fn start(pool: PgPool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let config = ServeConfig {
            public_base_url: Some(base.clone()),
            oidc_issuer: None,
            oidc_audience: None,
            oidc_jwks_file: None,
            oidc_client_id: None,
            dev_idp: true,
            ..config()
        };
        let state = AppState::new(pool.clone(), &config).unwrap();
        let app = router(state, &config, CancellationToken::new());
        let serving = svc_api::app::Serving {
            header_timeout: std::time::Duration::from_secs(30),
            grace: std::time::Duration::from_secs(1),
            shutdown: CancellationToken::new(),
        };
        tokio::spawn(svc_api::app::serve(listener, app, serving, std::future::pending()));
        Self { client: HttpClient::new(&base), base, pool, cookies: HashMap::new() }
    }

    /// Sends a request as a browser would, with the cookies it holds, and
    /// keeps the cookies it is given.
    async fn send(&mut self, method: Method, path_or_url: &str, form: Option<&[(&str, &str)]>) -> TestResponse {
        let path = path_or_url.strip_prefix(&self.base).unwrap_or(path_or_url).to_owned();
        let cookie: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let cookie = cookie.join("; ");
        let mut headers = vec![];
        if !cookie.is_empty() {
            headers.push(("cookie", cookie.as_str()));
        }
        let body = match form {
            Some(fields) => {
                headers.push(("content-type", "application/x-www-form-urlencoded"));
                url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish()
            }
            None => String::new(),
        };
        let response = self.client.send(method, &path, &headers, body).await;
        for set in response.headers.get_all("set-cookie") {
            let text = set.to_str().unwrap();
            let (pair, _) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || text.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        response
    }

    async fn get(&mut self, path: &str) -> TestResponse {
        self.send(Method::GET, path, None).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> TestResponse {
        self.send(Method::POST, path, Some(form)).await
    }

    /// Signs in through the development issuer; returns the callback's answer.
    async fn sign_in(&mut self) -> TestResponse {
        self.sign_in_at("/account/sign-in").await
    }

    async fn sign_in_at(&mut self, path: &str) -> TestResponse {
        let start = self.get(path).await;
        assert_eq!(start.status, 303, "{}", start.text());
        let authorize = start.header("location").unwrap().to_owned();
        for parameter in ["code_challenge_method=S256", "state=", "nonce=", "code_challenge=", "response_type=code"] {
            assert!(authorize.contains(parameter), "{parameter} in {authorize}");
        }
        let back = self.get(&authorize).await;
        assert_eq!(back.status, 302, "{}", back.text());
        let callback = back.header("location").unwrap().to_owned();
        assert!(callback.starts_with(&format!("{}/account/callback?", self.base)), "{callback}");
        self.get(&callback).await
    }
}

/// The value of `name="csrf"` in a page.
fn csrf(page: &TestResponse) -> String {
    let text = page.text();
    let at = text.find("name=\"csrf\" value=\"").expect("a CSRF field");
    let rest = &text[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_new_identity_signs_in_and_finishes_setup(pool: PgPool) {
    let mut site = Site::start(pool).await;
    let signed = site.sign_in().await;
    assert_eq!(signed.status, 303, "{}", signed.text());
    assert_eq!(signed.header("location"), Some("/account"));
    let set: Vec<&str> = signed.headers.get_all("set-cookie").iter().map(|v| v.to_str().unwrap()).collect();
    let session = set.iter().find(|c| c.starts_with("svc_session=")).expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/account", "Max-Age=28800"] {
        assert!(session.contains(flag), "{flag} in {session}");
    }
    assert!(!session.contains("Secure"), "no Secure over http: {session}");
    let token = session.trim_start_matches("svc_session=").split(';').next().unwrap();
    assert!(token.len() >= 43);
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT token_hash FROM web_sessions").fetch_one(&site.pool).await.unwrap();
    assert_ne!(stored, token.as_bytes(), "only the hash is stored");

    // Not set up yet: the application sends the User to setup.
    assert_eq!(site.get("/account").await.header("location"), Some("/account/setup"));
    let form = site.get("/account/setup").await;
    assert_eq!(form.status, 200, "{}", form.text());
    for header in ["content-security-policy", "x-request-id", "x-frame-options"] {
        assert!(form.header(header).is_some(), "{header}");
    }
    assert!(form.header("content-security-policy").unwrap().contains("script-src 'self'"));
    assert!(!form.text().contains("<script>"), "no inline script");
    let csrf = csrf(&form);

    let preview = site.post("/account/setup", &[("csrf", &csrf), ("name", "Ada"), ("workspace", "Ada's Lab")]).await;
    assert_eq!(preview.status, 200, "{}", preview.text());
    assert!(preview.text().contains("<code id=\"slug\">ada-s-lab</code>"), "{}", preview.text());
    assert_eq!(sqlx::query_scalar::<_, i64>("SELECT count(*) FROM users").fetch_one(&site.pool).await.unwrap(), 0);

    let done = site
        .post(
            "/account/setup/confirm",
            &[("csrf", &csrf), ("name", "Ada"), ("workspace", "Ada's Lab"), ("slug", "ada-s-lab")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.text());
    let (name, email, setup): (Option<String>, String, bool) =
        sqlx::query_as("SELECT name, email, setup_completed_at IS NOT NULL FROM users")
            .fetch_one(&site.pool)
            .await
            .unwrap();
    // The development provider's ID tokens carry no e-mail: it came from UserInfo.
    assert_eq!((name.as_deref(), email.as_str(), setup), (Some("Ada"), svc_api::devidp::EMAIL, true));

    // The confirmation posted again (a double click, a reload) answers what
    // the first did: no "slug taken" for the User's own new Workspace.
    let again = site
        .post(
            "/account/setup/confirm",
            &[("csrf", &csrf), ("name", "Ada"), ("workspace", "Ada's Lab"), ("slug", "ada-s-lab")],
        )
        .await;
    assert_eq!((again.status, again.header("location")), (303, Some("/account")), "{}", again.text());
    assert_eq!(sqlx::query_scalar::<_, i64>("SELECT count(*) FROM workspaces").fetch_one(&site.pool).await.unwrap(), 1);
    let role: String = sqlx::query_scalar(
        "SELECT m.role::text FROM memberships m JOIN workspaces w ON w.id = m.workspace_id WHERE w.slug = 'ada-s-lab'",
    )
    .fetch_one(&site.pool)
    .await
    .unwrap();
    assert_eq!(role, "owner");

    // Set up: /account is the next-steps page, naming the base URL and the CLI.
    let home = site.get("/account").await;
    assert_eq!(home.status, 200, "{}", home.text());
    let text = home.text();
    assert!(text.contains(&format!("svc auth login --endpoint {}", site.base)), "{text}");
    assert!(text.contains("Ada&#39;s Lab"), "{text}");
    // The header greets the User by the name given at setup, not the provider's.
    assert!(text.contains("Signed in as Ada</span>"), "{text}");
    assert!(!text.contains(svc_api::devidp::NAME), "{text}");
    assert_eq!(site.get("/account/setup").await.header("location"), Some("/account"), "setup done: straight on");

    // Sign-out ends the session server-side.
    let out = site.post("/account/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM web_sessions").fetch_one(&site.pool).await.unwrap(),
        0
    );
    assert!(site.get("/account").await.text().contains("href=\"/account/sign-in\""));
}

/// A provider that gives no e-mail address, neither in the ID token nor from
/// UserInfo: setup asks for it, says why, and records the one typed.
#[sqlx::test(migrations = "../migrations")]
async fn setup_asks_for_the_e_mail_address_a_provider_does_not_give(pool: PgPool) {
    let mut site = Site::start(pool).await;
    let signed = site.sign_in_at("/account/sign-in?as=new-without-email").await;
    assert_eq!(signed.status, 303, "{}", signed.text());
    let form = site.get("/account/setup").await;
    let text = form.text();
    assert!(text.contains("name=\"email\" type=\"email\""), "an e-mail field: {text}");
    assert!(text.contains("did not tell us your e-mail address"), "and why: {text}");
    let csrf = csrf(&form);
    let pool = site.pool.clone();
    let count = |sql| sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool);

    for email in ["", "not an address", "grace@"] {
        let refused = site
            .post("/account/setup", &[("csrf", &csrf), ("name", "Grace"), ("email", email), ("workspace", "Navy")])
            .await;
        assert_eq!(refused.status, 400, "{email:?}: {}", refused.text());
        assert!(refused.text().contains("Give your e-mail address."), "{}", refused.text());
    }
    let fields = [("csrf", csrf.as_str()), ("name", "Grace"), ("email", "grace@navy.example"), ("workspace", "Navy")];
    let preview = site.post("/account/setup", &fields).await;
    assert_eq!(preview.status, 200, "{}", preview.text());
    assert!(preview.text().contains("grace@navy.example"), "{}", preview.text());
    assert_eq!(count("SELECT count(*) FROM users").await.unwrap(), 0, "nothing before the confirmation");

    let done = site.post("/account/setup/confirm", &[&fields[..], &[("slug", "navy")]].concat()).await;
    assert_eq!(done.status, 303, "{}", done.text());
    let email: String = sqlx::query_scalar("SELECT email FROM users").fetch_one(&site.pool).await.unwrap();
    assert_eq!(email, "grace@navy.example");
    assert_eq!(count("SELECT count(*) FROM workspaces WHERE slug = 'navy'").await.unwrap(), 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn forms_without_the_session_csrf_token_are_refused_and_change_nothing(pool: PgPool) {
    let mut site = Site::start(pool).await;
    site.sign_in().await;
    let csrf = csrf(&site.get("/account/setup").await);
    for forged in [None, Some(""), Some("forged"), Some(&csrf[..csrf.len() - 1])] {
        let mut form = vec![("name", "Eve"), ("workspace", "Evil"), ("slug", "evil")];
        if let Some(token) = forged {
            form.push(("csrf", token));
        }
        for path in ["/account/setup", "/account/setup/confirm", "/account/workspaces", "/account/sign-out"] {
            let refused = site.post(path, &form).await;
            assert_eq!(refused.status, 403, "{path} with {forged:?}: {}", refused.text());
        }
    }
    let count = |sql| sqlx::query_scalar::<_, i64>(sql).fetch_one(&site.pool);
    assert_eq!(count("SELECT count(*) FROM users").await.unwrap(), 0);
    assert_eq!(count("SELECT count(*) FROM workspaces").await.unwrap(), 0);
    assert_eq!(count("SELECT count(*) FROM web_sessions").await.unwrap(), 1, "still signed in");

    // The right token from another session does not pass either.
    let mut other =
        Site { cookies: HashMap::new(), client: site.client.clone(), base: site.base.clone(), pool: site.pool.clone() };
    other.sign_in().await;
    let other_csrf = self::csrf(&other.get("/account/setup").await);
    assert_ne!(other_csrf, csrf);
    let refused = site.post("/account/setup", &[("csrf", &other_csrf), ("name", "Eve"), ("workspace", "Evil")]).await;
    assert_eq!(refused.status, 403);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_callback_not_started_in_this_browser_is_refused(pool: PgPool) {
    let mut site = Site::start(pool).await;
    let start = site.get("/account/sign-in").await;
    let authorize = start.header("location").unwrap().to_owned();
    let callback = site.get(&authorize).await.header("location").unwrap().to_owned();
    // Another browser (no sign-in cookie) gets the callback: login CSRF.
    let mut other =
        Site { cookies: HashMap::new(), client: site.client.clone(), base: site.base.clone(), pool: site.pool.clone() };
    assert_eq!(other.get(&callback).await.status, 400);
    // A tampered state in the right browser.
    let tampered = callback.replace("state=", "state=x");
    assert_eq!(site.get(&tampered).await.status, 400);
    // The sign-in was spent by that attempt: the genuine callback fails too.
    assert_eq!(site.get(&callback).await.status, 400);
    assert!(!site.cookies.contains_key("svc_session"));
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM web_sessions").fetch_one(&site.pool).await.unwrap(),
        0
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn setup_required_names_the_web_application(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let token = app.issuer().token("newcomer");
    let body = assert_problem(&app.op("identity/status", &token, None, json!({})).await, 403, "setup_required");
    assert_eq!(body["error"]["details"]["setupUrl"], "http://svc.test/account");
    assert!(body["error"]["message"].as_str().unwrap().contains("http://svc.test/account"), "{body}");

    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "svc_identity_status", "arguments": {} } });
    let mcp = app.mcp(Some(&token), None, message).await.json();
    let error = &mcp["result"]["structuredContent"]["error"];
    assert_eq!(error["code"], "setup_required", "{mcp}");
    assert_eq!(error["details"]["setupUrl"], "http://svc.test/account");
}

/// `Secure` exactly when the service is reached over https: a browser keeps
/// no `Secure` cookie an http page sets, so over http (off loopback too) the
/// flag would only break sign-in.
#[sqlx::test(migrations = "../migrations")]
async fn cookies_are_secure_exactly_over_https(pool: PgPool) {
    let cookie_of = |app: TestApp| async move {
        let request = http::Request::builder().uri("/account/join").body(axum::body::Body::empty()).unwrap();
        let page = app.send(request).await;
        assert_eq!(page.status, 200);
        page.header("set-cookie").unwrap().to_owned()
    };
    let https = ServeConfig { public_base_url: Some("https://svc.test".into()), ..config() };
    let cookie = cookie_of(TestApp::with_config(pool.clone(), https).await).await;
    for flag in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/account"] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    // The in-process app's own base URL is http://svc.test: not loopback, not https.
    let cookie = cookie_of(TestApp::new(pool).await).await;
    assert!(!cookie.contains("Secure") && cookie.contains("HttpOnly"), "{cookie}");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_development_provider_signs_in_new_local_users_on_request(pool: PgPool) {
    let mut site = Site::start(pool).await;
    assert!(site.get("/account").await.text().contains("href=\"/account/sign-in?as=new\""));
    let mut subjects = Vec::new();
    for path in ["/account/sign-in?as=new", "/account/sign-in?as=new", "/account/sign-in"] {
        site.cookies.clear();
        assert_eq!(site.sign_in_at(path).await.status, 303);
        let subject: String = sqlx::query_scalar("SELECT subject FROM web_sessions ORDER BY id DESC LIMIT 1")
            .fetch_one(&site.pool)
            .await
            .unwrap();
        subjects.push(subject);
    }
    assert!(subjects[0].starts_with("dev-user-") && subjects[1].starts_with("dev-user-"), "{subjects:?}");
    assert_ne!(subjects[0], subjects[1]);
    assert_eq!(subjects[2], "local-developer");
}

/// `svc-api admin user-revoke-sessions` ends a web session as it ends tokens:
/// its forms (setup among them, which writes the `users` row) are refused and
/// change nothing.
#[sqlx::test(migrations = "../migrations")]
async fn revoked_sessions_cannot_post_forms(pool: PgPool) {
    let mut site = Site::start(pool).await;
    assert_eq!(site.sign_in().await.status, 303);
    let csrf = csrf(&site.get("/account/setup").await);
    let done = site
        .post(
            "/account/setup/confirm",
            &[("csrf", &csrf), ("name", "Ada"), ("workspace", "Ada's Lab"), ("slug", "ada-s-lab")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.text());
    sqlx::query("UPDATE users SET sessions_revoked_at = now() + interval '1 second'")
        .execute(&site.pool)
        .await
        .unwrap();
    let again = site
        .post(
            "/account/setup/confirm",
            &[("csrf", &csrf), ("name", "Mallory"), ("workspace", "Other"), ("slug", "other")],
        )
        .await;
    assert_ne!(again.status, 303, "refused: {}", again.text());
    let name: Option<String> = sqlx::query_scalar("SELECT name FROM users").fetch_one(&site.pool).await.unwrap();
    assert_eq!(name.as_deref(), Some("Ada"), "the users row unchanged");
}
