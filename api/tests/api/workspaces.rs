//! workspace.list, .inspect, .create, .rename, .entitlements.inspect

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{TestApp, assert_ok, assert_problem};

#[sqlx::test(migrations = "../migrations")]
async fn create_returns_the_workspace_owned_by_the_caller(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let data = assert_ok(
        "workspaces/create",
        &app.op("workspaces/create", &user.token, None, json!({ "name": "Acme Support" })).await,
    );
    let ws = &data["workspace"];
    assert!(ws["id"].as_str().unwrap().starts_with("ws_"));
    assert_eq!(ws["name"], "Acme Support");
    assert_eq!(ws["slug"], "acme-support");
    assert_eq!(ws["role"], "owner");
    assert_eq!(ws["status"], "active");
}

#[sqlx::test(migrations = "../migrations")]
async fn derived_slugs_are_folded_and_made_unique(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let slug = |name: &'static str| {
        let app = &app;
        let token = user.token.clone();
        async move {
            let data = assert_ok(
                "workspaces/create",
                &app.op("workspaces/create", &token, None, json!({ "name": name })).await,
            );
            data["workspace"]["slug"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(slug("Crème Brûlée").await, "creme-brulee");
    assert_eq!(slug("Crème brûlée!").await, "creme-brulee-2");
    assert_eq!(slug("CREME BRULEE").await, "creme-brulee-3");
    assert_eq!(slug("日本語").await, "workspace");
    assert_eq!(slug("!!!").await, "workspace-2");
    // Long names: the suffix shortens the base, and later candidates still count up.
    let long = "a".repeat(120);
    let mut slugs = Vec::new();
    for _ in 0..11 {
        let data = assert_ok(
            "workspaces/create",
            &app.op("workspaces/create", &user.token, None, json!({ "name": long })).await,
        );
        slugs.push(data["workspace"]["slug"].as_str().unwrap().to_owned());
    }
    assert_eq!(slugs[0], "a".repeat(60));
    assert_eq!(slugs[1], format!("{}-2", "a".repeat(58)));
    assert_eq!(slugs[2], format!("{}-3", "a".repeat(58)));
    assert_eq!(slugs[10], format!("{}-11", "a".repeat(57)));
}

#[sqlx::test(migrations = "../migrations")]
async fn explicit_slugs_are_checked(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let data = assert_ok(
        "workspaces/create",
        &app.as_user(&alice, "workspaces/create", json!({ "name": "A", "slug": "acme" })).await,
    );
    assert_eq!(data["workspace"]["slug"], "acme");
    // Unique overall, not only per User.
    let body = assert_problem(
        &app.as_user(&bob, "workspaces/create", json!({ "name": "B", "slug": "acme" })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "slug_taken");
    for bad in ["Acme", "acme-", "-acme", "ac--me", "ac_me", ""] {
        let body = assert_problem(
            &app.as_user(&bob, "workspaces/create", json!({ "name": "B", "slug": bad })).await,
            400,
            "invalid_request",
        );
        assert_eq!(body["error"]["details"]["issues"][0]["path"], "/slug", "{bad}");
    }
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn name_bounds(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    for (name, ok) in
        [("x".repeat(120), true), ("x".repeat(121), false), (String::new(), false), ("é".repeat(120), true)]
    {
        let response = app.op("workspaces/create", &user.token, None, json!({ "name": name })).await;
        if ok {
            assert_ok("workspaces/create", &response);
        } else {
            let body = assert_problem(&response, 400, "invalid_request");
            assert_eq!(
                body["error"]["details"]["issues"],
                json!([{ "path": "/name", "message": body["error"]["details"]["issues"][0]["message"] }])
            );
        }
    }
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn list_pages_through_every_workspace_once(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let other = app.user("bob").await;
    app.workspace(&other, "Not yours").await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(app.workspace(&user, &format!("Team {i}")).await);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut input = json!({ "pageSize": 2 });
        if let Some(c) = &cursor {
            input["cursor"] = c.clone().into();
        }
        let response = app.op("workspaces/list", &user.token, None, input).await;
        let data = assert_ok("workspaces/list", &response);
        for ws in data["workspaces"].as_array().unwrap() {
            assert_eq!(ws["role"], "owner");
            seen.push(ws["id"].as_str().unwrap().to_owned());
        }
        match response.json()["meta"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, created, "oldest first, each once, only the caller's");
}

#[sqlx::test(migrations = "../migrations")]
async fn page_size_bounds_and_bad_cursors(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    for i in 0..3 {
        app.workspace(&user, &format!("W{i}")).await;
    }
    let list = |input: Value| app.op("workspaces/list", &user.token, None, input);
    for size in [0, 101] {
        let body = assert_problem(&list(json!({ "pageSize": size })).await, 400, "invalid_request");
        assert_eq!(body["error"]["details"]["issues"][0]["path"], "/pageSize");
    }
    let float = list(json!({ "pageSize": 2.0 })).await;
    assert_eq!(
        assert_ok("workspaces/list", &float)["workspaces"].as_array().unwrap().len(),
        2,
        "2.0 is a whole number"
    );
    let one = list(json!({ "pageSize": 1 })).await;
    assert_eq!(assert_ok("workspaces/list", &one)["workspaces"].as_array().unwrap().len(), 1);
    assert!(one.json()["meta"]["nextCursor"].is_string());
    let hundred = list(json!({ "pageSize": 100 })).await;
    assert_eq!(assert_ok("workspaces/list", &hundred)["workspaces"].as_array().unwrap().len(), 3);
    assert!(hundred.json()["meta"].get("nextCursor").is_none(), "no cursor when nothing remains");
    let default = list(json!({ "cursor": null })).await;
    assert_eq!(assert_ok("workspaces/list", &default)["workspaces"].as_array().unwrap().len(), 3);
    for bad in ["garbage", "YWdlbnRzOjAxOTg"] {
        let body = assert_problem(&list(json!({ "cursor": bad })).await, 400, "invalid_request");
        assert_eq!(body["error"]["details"]["reason"], "invalid_cursor");
    }
    assert_problem(&list(json!({ "cursor": "" })).await, 400, "invalid_request");
}

#[sqlx::test(migrations = "../migrations")]
async fn inspect_and_rename(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let data = assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &owner.token, None, json!({})).await);
    assert_eq!(data["workspace"]["id"], ws);
    let data = assert_ok(
        "workspaces/rename",
        &app.op("workspaces/rename", &owner.token, None, json!({ "name": "Renamed" })).await,
    );
    assert_eq!(data["workspace"]["name"], "Renamed");
    assert_eq!(data["workspace"]["slug"], "alice-workspace", "the slug does not follow renames");
    assert_eq!(data["workspace"]["role"], "owner");
    assert_problem(
        &app.op("workspaces/rename", &owner.token, None, json!({ "name": "x".repeat(121) })).await,
        400,
        "invalid_request",
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn only_admins_and_owners_rename(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (_owner, ws) = app.owner("alice").await;
    let member = app.user("bob").await;
    let admin = app.user("carol").await;
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "bob", "member").await.unwrap();
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "carol", "admin").await.unwrap();
    let body = assert_problem(
        &app.op("workspaces/rename", &member.token, Some(&ws), json!({ "name": "Mine" })).await,
        403,
        "permission_denied",
    );
    assert_eq!(body["error"]["details"]["requiredRole"], "admin");
    let data =
        assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &member.token, Some(&ws), json!({})).await);
    assert_eq!(data["workspace"]["name"], "alice workspace", "unchanged");
    assert_eq!(data["workspace"]["role"], "member");
    let data = assert_ok(
        "workspaces/rename",
        &app.op("workspaces/rename", &admin.token, Some(&ws), json!({ "name": "Ours" })).await,
    );
    assert_eq!(data["workspace"]["role"], "admin");
}

#[sqlx::test(migrations = "../migrations")]
async fn selection_rules(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let (_other, foreign) = app.owner("mallory").await;
    // No Workspace at all.
    let body = assert_problem(
        &app.op("workspaces/inspect", &user.token, None, json!({})).await,
        400,
        "workspace_selection_required",
    );
    assert_eq!(body["error"]["details"]["reason"], "ambiguous");
    app.workspace(&user, "One").await;
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &user.token, None, json!({})).await);
    app.workspace(&user, "Two").await;
    // Two Workspaces and no header.
    assert_problem(
        &app.op("workspaces/inspect", &user.token, None, json!({})).await,
        400,
        "workspace_selection_required",
    );
    // Someone else's Workspace answers exactly as an unknown one.
    let unknown = app.op("workspaces/inspect", &user.token, Some("ws_00000000000000000000000000"), json!({})).await;
    let theirs = app.op("workspaces/inspect", &user.token, Some(&foreign), json!({})).await;
    let theirs_by_slug = app.op("workspaces/inspect", &user.token, Some("mallory-workspace"), json!({})).await;
    let error =
        |r: &svc_tests::http::TestResponse| assert_problem(r, 400, "workspace_selection_required")["error"].clone();
    assert_eq!(error(&unknown), error(&theirs));
    assert_eq!(error(&unknown), error(&theirs_by_slug));
}

#[sqlx::test(migrations = "../migrations")]
async fn archived_workspaces_fail_closed_for_mutations(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::set_archived(&app.pool, &ws, true).await.unwrap();
    assert_problem(
        &app.op("workspaces/rename", &owner.token, None, json!({ "name": "New" })).await,
        409,
        "workspace_archived",
    );
    let data = assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &owner.token, None, json!({})).await);
    assert_eq!(data["workspace"]["status"], "archived");
    assert_eq!(data["workspace"]["name"], "alice workspace");
    assert_ok(
        "workspaces/entitlements/inspect",
        &app.op("workspaces/entitlements/inspect", &owner.token, None, json!({})).await,
    );
    svc_core::admin::set_archived(&app.pool, &ws, false).await.unwrap();
    assert_ok("workspaces/rename", &app.op("workspaces/rename", &owner.token, None, json!({ "name": "New" })).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_new_workspace_is_on_a_fourteen_day_trial(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    app.agent(&owner, &ws, "Helper").await;
    let data = assert_ok(
        "workspaces/entitlements/inspect",
        &app.op("workspaces/entitlements/inspect", &owner.token, None, json!({})).await,
    );
    let e = &data["entitlement"];
    assert_eq!(e["workspaceId"], ws);
    assert_eq!(
        (e["plan"].as_str(), e["planName"].as_str(), e["status"].as_str()),
        (Some("trial"), Some("Trial"), Some("trialing"))
    );
    assert_eq!(e["active"], true);
    assert_eq!(e["features"], json!(["agents", "knowledge", "public_chat", "widget", "api_keys", "mcp"]));
    assert_eq!(
        e["limits"],
        json!({ "agents": 3, "api_keys": 5, "knowledge_sources": 200, "knowledge_bytes": 50_000_000, "conversations": 500 })
    );
    assert_eq!(e["usage"]["agents"], 1);
    let now_ms = svc_tests::now_secs() * 1000;
    let trial_end = e["trialEnd"].as_i64().unwrap();
    let fourteen_days = 14 * 24 * 3600 * 1000;
    assert!((trial_end - now_ms - fourteen_days).abs() < 60_000, "{trial_end}");
    assert_eq!((e["periodEnd"].clone(), e["cancelAtPeriodEnd"].clone()), (Value::Null, json!(false)));
}

#[sqlx::test(migrations = "../migrations")]
async fn plans_set_by_operators(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let entitlement = || async {
        assert_ok(
            "workspaces/entitlements/inspect",
            &app.op("workspaces/entitlements/inspect", &owner.token, None, json!({})).await,
        )["entitlement"]
            .clone()
    };
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &["agents=7".to_owned()]).await.unwrap();
    let e = entitlement().await;
    assert_eq!(
        (e["plan"].as_str(), e["status"].as_str(), e["active"].as_bool()),
        (Some("pro"), Some("active"), Some(true))
    );
    assert_eq!(e["limits"]["agents"], 7);
    assert!(e["periodEnd"].is_i64());
    svc_core::admin::plan_set(&app.pool, &ws, "expired", &[]).await.unwrap();
    let e = entitlement().await;
    assert_eq!((e["status"].as_str(), e["active"].as_bool()), (Some("expired"), Some(false)));
    // A trial past its end is expired too.
    sqlx::query("UPDATE workspaces SET plan = 'trial', trial_end = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .unwrap();
    let e = entitlement().await;
    assert_eq!(
        (e["plan"].as_str(), e["status"].as_str(), e["active"].as_bool()),
        (Some("trial"), Some("expired"), Some(false))
    );
    for bad in [&["agents"][..], &["robots=1"], &["agents=-1"]] {
        let pairs: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        assert!(svc_core::admin::plan_set(&app.pool, &ws, "pro", &pairs).await.is_err(), "{bad:?}");
    }
    assert!(svc_core::admin::plan_set(&app.pool, &ws, "platinum", &[]).await.is_err());
}
