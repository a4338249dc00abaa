//! The web application's members: invites (single use, expiring), joining
//! with the invite's role, role changes and removal under the role rules.
//! Sessions are started from an ID token's identity directly (the sign-in
//! flow itself is tested in `account`).

use axum::body::Body;
use http::Request;
use sqlx::PgPool;
use svc_core::auth::jwt::IdToken;
use svc_tests::ISSUER;
use svc_tests::http::TestResponse;

use crate::helpers::{TestApp, TestUser, config};

/// A browser of one User: their session cookie (and any other cookie given).
struct Browser<'a> {
    app: &'a TestApp,
    cookies: Vec<(String, String)>,
}

impl<'a> Browser<'a> {
    async fn of(app: &'a TestApp, subject: &str) -> Browser<'a> {
        let id = IdToken {
            issuer: ISSUER.into(),
            subject: subject.into(),
            email: Some(format!("{subject}@example.test")),
            name: Some(subject.into()),
        };
        let started = svc_core::account::start_session(&app.pool, &id).await.unwrap();
        Browser { app, cookies: vec![("svc_session".into(), started.token)] }
    }

    async fn send(&mut self, method: &str, path: &str, form: Option<&[(&str, &str)]>) -> TestResponse {
        let cookie: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut request = Request::builder().method(method).uri(path).header("cookie", cookie.join("; "));
        let body = match form {
            Some(fields) => {
                request = request.header("content-type", "application/x-www-form-urlencoded");
                url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish()
            }
            None => String::new(),
        };
        let response = self.app.send(request.body(Body::from(body)).unwrap()).await;
        for set in response.headers.get_all("set-cookie") {
            let text = set.to_str().unwrap();
            let pair = text.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != name);
            if !value.is_empty() && !text.contains("Max-Age=0") {
                self.cookies.push((name.into(), value.into()));
            }
        }
        response
    }

    async fn get(&mut self, path: &str) -> TestResponse {
        self.send("GET", path, None).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> TestResponse {
        self.send("POST", path, Some(form)).await
    }

    /// The CSRF token of this session's forms.
    async fn csrf(&mut self) -> String {
        field(&self.get("/account").await, "csrf")
    }

    /// Creates an invite link in `ws`; returns its code.
    async fn invite(&mut self, ws: &str, role: &str) -> TestResponse {
        let csrf = self.csrf().await;
        self.post(&format!("/account/workspaces/{ws}/invites"), &[("csrf", &csrf), ("role", role)]).await
    }

    /// Opens an invite link (its code from the fragment) and confirms.
    async fn join(&mut self, code: &str) -> TestResponse {
        let page = self.get("/account/join").await;
        let form_token = field(&page, "csrf");
        let started = self.post("/account/join", &[("csrf", &form_token), ("code", code)]).await;
        assert_eq!(started.status, 303, "{}", started.text());
        let confirm = self.get("/account/join/confirm").await;
        if confirm.status != 200 {
            return confirm;
        }
        let csrf = field(&confirm, "csrf");
        self.post("/account/join/accept", &[("csrf", &csrf)]).await
    }
}

fn field(page: &TestResponse, name: &str) -> String {
    let text = page.text();
    let marker = format!("name=\"{name}\" value=\"");
    let at = text.find(&marker).unwrap_or_else(|| panic!("no {name} in {text}"));
    let rest = &text[at + marker.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

fn invite_code(page: &TestResponse) -> String {
    assert_eq!(page.status, 200, "{}", page.text());
    let text = page.text();
    let at = text.find("/account/join#").expect("an invite link");
    let rest = &text[at + "/account/join#".len()..];
    rest[..rest.find('<').unwrap()].to_owned()
}

async fn role_of(app: &TestApp, ws: &str, subject: &str) -> Option<String> {
    let id = svc_core::ids::WorkspaceId::parse(ws).unwrap();
    sqlx::query_scalar(
        "SELECT m.role::text FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 AND u.subject = $2",
    )
    .bind(id.0)
    .bind(subject)
    .fetch_optional(&app.pool)
    .await
    .unwrap()
}

async fn user_id(app: &TestApp, subject: &str) -> String {
    let id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM users WHERE subject = $1").bind(subject).fetch_one(&app.pool).await.unwrap();
    svc_core::ids::UserId(id).to_string()
}

#[sqlx::test(migrations = "../migrations")]
async fn an_invite_joins_one_user_once_with_its_role(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    let _bob: TestUser = app.user("bob").await;
    let _carol: TestUser = app.user("carol").await;
    let mut olga = Browser::of(&app, "olga").await;
    let link = olga.invite(&ws, "admin").await;
    let code = invite_code(&link);
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT token_hash FROM workspace_invites").fetch_one(&app.pool).await.unwrap();
    assert_ne!(stored, code.as_bytes(), "only the hash is stored");

    let mut bob = Browser::of(&app, "bob").await;
    let joined = bob.join(&code).await;
    assert_eq!(joined.status, 303, "{}", joined.text());
    assert_eq!(joined.header("location"), Some(format!("/account/workspaces/{ws}").as_str()));
    assert_eq!(role_of(&app, &ws, "bob").await.as_deref(), Some("admin"));
    assert!(!bob.cookies.iter().any(|(n, _)| n == "svc_invite"), "the code is forgotten");

    // Used: nobody else joins with it.
    let mut carol = Browser::of(&app, "carol").await;
    assert_eq!(carol.join(&code).await.status, 410);
    assert_eq!(role_of(&app, &ws, "carol").await, None);
}

#[sqlx::test(migrations = "../migrations")]
async fn an_expired_invite_is_refused(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    app.user("bob").await;
    let mut olga = Browser::of(&app, "olga").await;
    let code = invite_code(&olga.invite(&ws, "member").await);
    // One second past its end.
    sqlx::query("UPDATE workspace_invites SET expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .unwrap();
    let mut bob = Browser::of(&app, "bob").await;
    assert_eq!(bob.join(&code).await.status, 410);
    assert_eq!(role_of(&app, &ws, "bob").await, None);
    // Accepting directly (skipping the confirm page) fails the same way.
    let csrf = bob.csrf().await;
    let page = bob.get("/account/join").await;
    let form_token = field(&page, "csrf");
    assert_eq!(bob.post("/account/join", &[("csrf", &form_token), ("code", &code)]).await.status, 303);
    let accepted = bob.post("/account/join/accept", &[("csrf", &csrf)]).await;
    assert_eq!(accepted.status, 400, "{}", accepted.text());
    assert!(accepted.text().contains("This invite link was used already"), "{}", accepted.text());
    assert_eq!(role_of(&app, &ws, "bob").await, None);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_new_user_with_an_invite_finishes_setup_then_joins(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    let mut olga = Browser::of(&app, "olga").await;
    let code = invite_code(&olga.invite(&ws, "member").await);
    let mut newcomer = Browser::of(&app, "newcomer").await;
    let page = newcomer.get("/account/join").await;
    let token = field(&page, "csrf");
    assert_eq!(newcomer.post("/account/join", &[("csrf", &token), ("code", &code)]).await.status, 303);
    // Not set up: setup first, with no Workspace of their own to create.
    assert_eq!(newcomer.get("/account/join/confirm").await.header("location"), Some("/account/setup"));
    let setup = newcomer.get("/account/setup").await;
    assert!(!setup.text().contains("name=\"workspace\""), "{}", setup.text());
    let csrf = field(&setup, "csrf");
    let done = newcomer.post("/account/setup", &[("csrf", &csrf), ("name", "New Comer")]).await;
    assert_eq!(done.header("location"), Some("/account/join/confirm"), "{}", done.text());
    let confirm = newcomer.get("/account/join/confirm").await;
    assert!(confirm.text().contains("olga workspace"), "{}", confirm.text());
    assert_eq!(newcomer.post("/account/join/accept", &[("csrf", &csrf)]).await.status, 303);
    assert_eq!(role_of(&app, &ws, "newcomer").await.as_deref(), Some("member"));
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 1, "no Workspace of their own");
}

#[sqlx::test(migrations = "../migrations")]
async fn role_rules_hold(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    for (subject, role) in [("adam", "admin"), ("mia", "member")] {
        app.user(subject).await;
        svc_core::admin::member_add(&app.pool, &ws, ISSUER, subject, role).await.unwrap();
    }
    let (olga_id, adam_id, mia_id) =
        (user_id(&app, "olga").await, user_id(&app, "adam").await, user_id(&app, "mia").await);
    let mut olga = Browser::of(&app, "olga").await;
    let mut adam = Browser::of(&app, "adam").await;
    let mut mia = Browser::of(&app, "mia").await;

    // A member manages nobody; an admin does not hand out the owner role.
    assert_eq!(mia.invite(&ws, "member").await.status, 403);
    assert_eq!(adam.invite(&ws, "owner").await.status, 403);
    assert_eq!(adam.invite(&ws, "admin").await.status, 200);

    let change = async |browser: &mut Browser<'_>, user: &str, role: &str| {
        let csrf = browser.csrf().await;
        browser
            .post(
                &format!("/account/workspaces/{ws}/members/role"),
                &[("csrf", &csrf), ("userId", user), ("role", role)],
            )
            .await
            .status
    };
    assert_eq!(change(&mut mia, &adam_id, "member").await, 403, "a member changes no role");
    assert_eq!(change(&mut adam, &olga_id, "member").await, 403, "an admin does not demote an owner");
    assert_eq!(change(&mut adam, &mia_id, "owner").await, 403, "an admin makes no owner");
    assert_eq!(change(&mut olga, &olga_id, "admin").await, 400, "the last owner stays");
    assert_eq!(role_of(&app, &ws, "olga").await.as_deref(), Some("owner"));
    assert_eq!(change(&mut adam, &mia_id, "admin").await, 303);
    assert_eq!(role_of(&app, &ws, "mia").await.as_deref(), Some("admin"));

    let remove = async |browser: &mut Browser<'_>, user: &str| {
        let csrf = browser.csrf().await;
        browser
            .post(&format!("/account/workspaces/{ws}/members/remove"), &[("csrf", &csrf), ("userId", user)])
            .await
            .status
    };
    assert_eq!(remove(&mut adam, &olga_id).await, 403, "an admin does not remove an owner");
    assert_eq!(remove(&mut olga, &olga_id).await, 400, "the last owner stays");
    assert_eq!(remove(&mut olga, &mia_id).await, 303);
    assert_eq!(role_of(&app, &ws, "mia").await, None);

    // Someone outside the Workspace sees nothing of it.
    app.user("zed").await;
    let mut zed = Browser::of(&app, "zed").await;
    assert_eq!(zed.get(&format!("/account/workspaces/{ws}")).await.status, 404);
    assert_eq!(remove(&mut zed, &adam_id).await, 404);
    assert_eq!(role_of(&app, &ws, "adam").await.as_deref(), Some("admin"));
}

#[sqlx::test(migrations = "../migrations")]
async fn api_keys_are_made_through_the_catalog_with_the_session(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    app.user("mia").await;
    svc_core::admin::member_add(&app.pool, &ws, ISSUER, "mia", "member").await.unwrap();
    let mut olga = Browser::of(&app, "olga").await;
    let csrf = olga.csrf().await;
    let created = olga
        .post(
            &format!("/account/workspaces/{ws}/keys"),
            &[
                ("csrf", &csrf),
                ("name", "ci"),
                ("preset", "custom"),
                ("scopes", "agent:read"),
                ("scopes", "workspace:read"),
            ],
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let text = created.text();
    let at = text.find("svck_").unwrap();
    let secret = &text[at..at + text[at..].find('<').unwrap()];
    let status = app.op("identity/status", secret, None, serde_json::json!({})).await;
    assert_eq!(status.status, 200, "{}", status.text());
    assert_eq!(app.op("agents/list", secret, None, serde_json::json!({})).await.status, 200);
    assert_eq!(
        app.op("knowledge-sources/list", secret, None, serde_json::json!({"agentId": "agt_x"})).await.status,
        403,
        "scope not given"
    );
    let page = olga.get(&format!("/account/workspaces/{ws}")).await;
    assert!(!page.text().contains(secret), "the secret is shown once");

    // Revoke: the key stops answering.
    let key_id = field(&page, "apiKeyId");
    assert_eq!(
        olga.post(&format!("/account/workspaces/{ws}/keys/revoke"), &[("csrf", &csrf), ("apiKeyId", &key_id)])
            .await
            .status,
        303
    );
    assert_eq!(app.op("identity/status", secret, None, serde_json::json!({})).await.status, 401);

    // The form is an owner's or admin's: a member is not shown it (nor any
    // key's rotate or revoke), and the catalog refuses a member's post anyway.
    assert!(page.text().contains("Create an API key"), "{}", page.text());
    let mut mia = Browser::of(&app, "mia").await;
    let seen = mia.get(&format!("/account/workspaces/{ws}")).await;
    assert_eq!(seen.status, 200, "{}", seen.text());
    for form in ["Create an API key", "/keys\"", "/keys/rotate", "/keys/revoke", "/invites"] {
        assert!(!seen.text().contains(form), "{form} shown to a member: {}", seen.text());
    }
    let csrf = mia.csrf().await;
    let refused = mia
        .post(&format!("/account/workspaces/{ws}/keys"), &[("csrf", &csrf), ("name", "x"), ("preset", "operator")])
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(app.count("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").await, 0);
}

/// An admin demoted while their request waits for the members' lock manages
/// nobody once it has the lock: the acting User's role is read under it.
#[sqlx::test(migrations = "../migrations")]
async fn a_demotion_that_lands_first_holds(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    for (subject, role) in [("adam", "admin"), ("mia", "member")] {
        app.user(subject).await;
        svc_core::admin::member_add(&app.pool, &ws, ISSUER, subject, role).await.unwrap();
    }
    let mia_id = user_id(&app, "mia").await;
    let mut adam = Browser::of(&app, "adam").await;
    let csrf = adam.csrf().await;

    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM memberships FOR UPDATE").execute(&mut *holder).await.unwrap();
    let path = format!("/account/workspaces/{ws}/members/remove");
    let fields = [("csrf", csrf.as_str()), ("userId", mia_id.as_str())];
    let removal = adam.post(&path, &fields);
    let demotion = async {
        crate::helpers::waits_on_a_lock(&app.pool, "%memberships%").await;
        sqlx::query(
            "UPDATE memberships SET role = 'member' WHERE user_id = (SELECT id FROM users WHERE subject = 'adam')",
        )
        .execute(&mut *holder)
        .await
        .unwrap();
        holder.commit().await.unwrap();
    };
    let (response, ()) = tokio::join!(removal, demotion);
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(role_of(&app, &ws, "mia").await.as_deref(), Some("member"), "mia is still a member");
}

/// The idempotency key of `action`'s form (`role`, `remove`) for `user` on a
/// Workspace's page.
fn form_key(page: &TestResponse, action: &str, user: &str) -> String {
    let text = page.text();
    let form = text
        .split("<form ")
        .find(|form| form.contains(&format!("/members/{action}\"")) && form.contains(&format!("value=\"{user}\"")))
        .unwrap_or_else(|| panic!("no {action} form for {user} in {text}"));
    let marker = "name=\"idempotencyKey\" value=\"";
    let rest = &form[form.find(marker).expect("an idempotency key") + marker.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// A member form posted twice (a double click, a reload) answers as the
/// first post did, through the call path's idempotency; the same key with
/// another member is refused and changes nothing.
#[sqlx::test(migrations = "../migrations")]
async fn a_form_posted_twice_answers_as_the_first(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    for (subject, role) in [("adam", "admin"), ("mia", "member")] {
        app.user(subject).await;
        svc_core::admin::member_add(&app.pool, &ws, ISSUER, subject, role).await.unwrap();
    }
    let (adam_id, mia_id) = (user_id(&app, "adam").await, user_id(&app, "mia").await);
    let mut olga = Browser::of(&app, "olga").await;
    let page = olga.get(&format!("/account/workspaces/{ws}")).await;
    let csrf = field(&page, "csrf");
    let key = form_key(&page, "remove", &mia_id);
    assert_ne!(key, form_key(&page, "remove", &adam_id), "a key per form");
    let path = format!("/account/workspaces/{ws}/members/remove");
    for _ in 0..2 {
        let removed = olga.post(&path, &[("csrf", &csrf), ("userId", &mia_id), ("idempotencyKey", &key)]).await;
        assert_eq!(removed.status, 303, "{}", removed.text());
    }
    assert_eq!(role_of(&app, &ws, "mia").await, None);

    let other = olga.post(&path, &[("csrf", &csrf), ("userId", &adam_id), ("idempotencyKey", &key)]).await;
    assert_eq!(other.status, 409, "{}", other.text());
    assert_eq!(role_of(&app, &ws, "adam").await.as_deref(), Some("admin"));

    let role_key = form_key(&page, "role", &adam_id);
    let changed = olga
        .post(
            &format!("/account/workspaces/{ws}/members/role"),
            &[("csrf", &csrf), ("userId", &adam_id), ("role", "member"), ("idempotencyKey", &role_key)],
        )
        .await;
    assert_eq!(changed.status, 303, "{}", changed.text());
    assert_eq!(role_of(&app, &ws, "adam").await.as_deref(), Some("member"));
}

/// A role changed through the web application is what the User's very next
/// call is authorized with, though this process keeps callers for a minute:
/// the call path drops them after the change.
#[sqlx::test(migrations = "../migrations")]
async fn a_membership_change_reaches_the_callers_kept_at_once(pool: PgPool) {
    let config =
        svc_api::config::ServeConfig { caller_cache_entries: 1_000, caller_cache_max_age_ms: 60_000, ..config() };
    let app = TestApp::with_config(pool, config).await;
    // Callers are kept only while the process hears PostgreSQL's changes.
    let started = std::time::Instant::now();
    while app.metric("svc_caller_cache_listening").await != 1.0 {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the caller cache never listened");
        tokio::task::yield_now().await;
    }
    let (_, ws) = app.owner("olga").await;
    let mia = app.user("mia").await;
    svc_core::admin::member_add(&app.pool, &ws, ISSUER, "mia", "member").await.unwrap();
    let mia_id = user_id(&app, "mia").await;
    let keys = || app.op("api-keys/list", &mia.token, Some(&ws), serde_json::json!({}));
    assert_eq!(keys().await.status, 403, "a member lists no keys");
    // Kept once the notification of her joining (which drops what was kept
    // of her) has been heard: a call then finds her caller.
    let started = std::time::Instant::now();
    loop {
        let hits = app.metric("svc_caller_cache_lookups_total{result=\"hit\"}").await;
        assert_eq!(keys().await.status, 403);
        if app.metric("svc_caller_cache_lookups_total{result=\"hit\"}").await == hits + 1.0 {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "mia's caller is never kept");
    }

    let mut olga = Browser::of(&app, "olga").await;
    let csrf = olga.csrf().await;
    let path = format!("/account/workspaces/{ws}/members/role");
    for (role, status) in [("admin", 200), ("member", 403)] {
        let changed = olga.post(&path, &[("csrf", &csrf), ("userId", &mia_id), ("role", role)]).await;
        assert_eq!(changed.status, 303, "{}", changed.text());
        assert_eq!(keys().await.status, status, "mia as {role}, at once");
    }
}

/// A refused change answers with a page naming the request's id, as every
/// surface gives one.
#[sqlx::test(migrations = "../migrations")]
async fn a_refused_change_names_its_request(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_, ws) = app.owner("olga").await;
    app.user("mia").await;
    svc_core::admin::member_add(&app.pool, &ws, ISSUER, "mia", "member").await.unwrap();
    let olga_id = user_id(&app, "olga").await;
    let mut mia = Browser::of(&app, "mia").await;
    let csrf = mia.csrf().await;
    let refused = mia
        .post(
            &format!("/account/workspaces/{ws}/members/role"),
            &[("csrf", &csrf), ("userId", &olga_id), ("role", "member")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    let id = refused.header("x-request-id").expect("a request id").to_owned();
    assert!(id.starts_with("req_") && refused.text().contains(&id), "{id} on the page: {}", refused.text());
    assert_eq!(role_of(&app, &ws, "olga").await.as_deref(), Some("owner"));
}
