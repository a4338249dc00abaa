//! agent.list, .inspect, .create, .configure, .delete

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{TestApp, assert_ok, assert_problem};

#[sqlx::test(migrations = "../migrations")]
async fn create_applies_defaults(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let data = assert_ok(
        "agents/create",
        &app.op("agents/create", &owner.token, None, json!({ "name": "Support Bot" })).await,
    );
    let agent = &data["agent"];
    assert!(agent["id"].as_str().unwrap().starts_with("agt_"));
    assert_eq!(agent["workspaceId"], ws);
    assert_eq!(agent["name"], "Support Bot");
    assert_eq!(agent["slug"], "support-bot");
    assert_eq!(agent["status"], "active");
    assert_eq!(agent["defaultLanguage"], "en");
    assert_eq!(agent["configuration"], json!({ "instructions": null, "temperature": 0.2 }));
}

#[sqlx::test(migrations = "../migrations")]
async fn create_with_every_field(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let input = json!({ "name": "Ayuda", "slug": "ayuda", "defaultLanguage": "es", "instructions": "Sé breve.", "temperature": 1.5 });
    let data = assert_ok("agents/create", &app.op("agents/create", &owner.token, None, input).await);
    assert_eq!(data["agent"]["slug"], "ayuda");
    assert_eq!(data["agent"]["defaultLanguage"], "es");
    assert_eq!(data["agent"]["configuration"], json!({ "instructions": "Sé breve.", "temperature": 1.5 }));
    let inspected = assert_ok(
        "agents/inspect",
        &app.op("agents/inspect", &owner.token, None, json!({ "agentId": data["agent"]["id"] })).await,
    );
    assert_eq!(inspected["agent"], data["agent"]);
}

#[sqlx::test(migrations = "../migrations")]
async fn create_bounds(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let cases: Vec<(Value, Option<&str>)> = vec![
        (json!({ "name": "x".repeat(120) }), None),
        (json!({ "name": "x".repeat(121) }), Some("/name")),
        (json!({ "name": "" }), Some("/name")),
        (json!({ "name": "t", "temperature": 2 }), None),
        (json!({ "name": "t", "temperature": 0 }), None),
        (json!({ "name": "t", "temperature": 2.01 }), Some("/temperature")),
        (json!({ "name": "t", "temperature": -0.01 }), Some("/temperature")),
        (json!({ "name": "t", "temperature": "1" }), Some("/temperature")),
        (json!({ "name": "i", "instructions": "x".repeat(20000) }), None),
        (json!({ "name": "i", "instructions": "x".repeat(20001) }), Some("/instructions")),
        (json!({ "name": "i", "instructions": "" }), Some("/instructions")),
        (json!({ "name": "i", "instructions": null }), Some("/instructions")),
        (json!({ "name": "l", "defaultLanguage": "fr" }), Some("/defaultLanguage")),
        (json!({ "name": "s", "slug": "Not A Slug" }), Some("/slug")),
        (json!({ "name": "u", "unknown": true }), Some("/unknown")),
    ];
    let mut created = 0;
    for (input, bad_path) in cases {
        let response = app.op("agents/create", &owner.token, None, input.clone()).await;
        match bad_path {
            None => {
                assert_ok("agents/create", &response);
                created += 1;
            }
            Some(path) => {
                let body = assert_problem(&response, 400, "invalid_request");
                assert_eq!(body["error"]["details"]["issues"][0]["path"], path, "{input}");
            }
        }
    }
    assert_eq!(app.count("SELECT count(*) FROM agents").await, created);
}

#[sqlx::test(migrations = "../migrations")]
async fn slugs_are_unique_per_workspace_and_released_by_deletion(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (alice, _ws) = app.owner("alice").await;
    let (bob, _) = app.owner("bob").await;
    let create = |token: String, input: Value| {
        let app = &app;
        async move { app.op("agents/create", &token, None, input).await }
    };
    let first = assert_ok("agents/create", &create(alice.token.clone(), json!({ "name": "Helper" })).await);
    let second = assert_ok("agents/create", &create(alice.token.clone(), json!({ "name": "helper!" })).await);
    assert_eq!((first["agent"]["slug"].as_str(), second["agent"]["slug"].as_str()), (Some("helper"), Some("helper-2")));
    // Another Workspace may use the same slug.
    let other = assert_ok("agents/create", &create(bob.token.clone(), json!({ "name": "x", "slug": "helper" })).await);
    assert_eq!(other["agent"]["slug"], "helper");
    let body = assert_problem(
        &create(alice.token.clone(), json!({ "name": "x", "slug": "helper" })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "slug_taken");
    let id = first["agent"]["id"].clone();
    assert_ok(
        "agents/delete",
        &app.op("agents/delete", &alice.token, None, json!({ "agentId": id, "confirm": true })).await,
    );
    let reused =
        assert_ok("agents/create", &create(alice.token.clone(), json!({ "name": "x", "slug": "helper" })).await);
    assert_ne!(reused["agent"]["id"], id);
}

#[sqlx::test(migrations = "../migrations")]
async fn list_is_keyset_paged_and_skips_deleted_agents(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.agent(&owner, &ws, &format!("Agent {i}")).await);
    }
    assert_ok(
        "agents/delete",
        &app.op("agents/delete", &owner.token, None, json!({ "agentId": ids[2], "confirm": true })).await,
    );
    ids.remove(2);
    let first = app.op("agents/list", &owner.token, None, json!({ "pageSize": 3 })).await;
    let page: Vec<Value> = assert_ok("agents/list", &first)["agents"].as_array().unwrap().clone();
    let cursor = first.json()["meta"]["nextCursor"].as_str().unwrap().to_owned();
    // An Agent created during the walk comes after the cursor: not skipped, not repeated.
    let late = app.agent(&owner, &ws, "Late").await;
    let second = app.op("agents/list", &owner.token, None, json!({ "pageSize": 3, "cursor": cursor })).await;
    let rest: Vec<Value> = assert_ok("agents/list", &second)["agents"].as_array().unwrap().clone();
    assert!(second.json()["meta"].get("nextCursor").is_none());
    let seen: Vec<&str> = page.iter().chain(&rest).map(|a| a["id"].as_str().unwrap()).collect();
    ids.push(late);
    assert_eq!(seen, ids);
    // A cursor of another list is refused.
    app.workspace(&owner, "Second").await;
    let workspaces = app.op("workspaces/list", &owner.token, None, json!({ "pageSize": 1 })).await;
    let foreign_cursor = workspaces.json()["meta"]["nextCursor"].as_str().unwrap().to_owned();
    let body = assert_problem(
        &app.op("agents/list", &owner.token, Some(&ws), json!({ "cursor": foreign_cursor })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "invalid_cursor");
}

#[sqlx::test(migrations = "../migrations")]
async fn configure_updates_only_supplied_fields(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let id = app.agent(&owner, &ws, "Helper").await;
    let configure = |input: Value| app.op("agents/configure", &owner.token, None, input);
    let data = assert_ok("agents/configure", &configure(json!({ "agentId": id, "instructions": "Be kind." })).await);
    assert_eq!(data["agent"]["configuration"], json!({ "instructions": "Be kind.", "temperature": 0.2 }));
    assert_eq!(data["agent"]["name"], "Helper");
    let data = assert_ok(
        "agents/configure",
        &configure(json!({ "agentId": id, "name": "Renamed", "defaultLanguage": "es", "temperature": 2 })).await,
    );
    assert_eq!(data["agent"]["name"], "Renamed");
    assert_eq!(data["agent"]["slug"], "helper", "the slug does not follow renames");
    assert_eq!(data["agent"]["defaultLanguage"], "es");
    assert_eq!(data["agent"]["configuration"], json!({ "instructions": "Be kind.", "temperature": 2.0 }));
    let data = assert_ok("agents/configure", &configure(json!({ "agentId": id, "instructions": null })).await);
    assert_eq!(data["agent"]["configuration"]["instructions"], Value::Null, "null clears");
    let data = assert_ok("agents/configure", &configure(json!({ "agentId": id })).await);
    assert_eq!(data["agent"]["name"], "Renamed", "nothing supplied, nothing changed");
    for (input, path) in [
        (json!({ "agentId": id, "temperature": 2.01 }), "/temperature"),
        (json!({ "agentId": id, "name": null }), "/name"),
        (json!({ "agentId": id, "name": "x".repeat(121) }), "/name"),
        (json!({ "agentId": id, "instructions": "x".repeat(20001) }), "/instructions"),
        (json!({ "agentId": id, "slug": "new" }), "/slug"),
        (json!({ "name": "x" }), "/agentId"),
    ] {
        let body = assert_problem(&configure(input).await, 400, "invalid_request");
        assert_eq!(body["error"]["details"]["issues"][0]["path"], path);
    }
    assert_problem(
        &configure(json!({ "agentId": "agt_00000000000000000000000000", "name": "x" })).await,
        404,
        "resource_not_found",
    );
    assert_problem(&configure(json!({ "agentId": "not-an-id", "name": "x" })).await, 404, "resource_not_found");
}

#[sqlx::test(migrations = "../migrations")]
async fn delete_needs_confirmation(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let id = app.agent(&owner, &ws, "Helper").await;
    let delete = |input: Value| app.op("agents/delete", &owner.token, None, input);
    assert_problem(&delete(json!({ "agentId": id })).await, 428, "confirmation_required");
    assert_problem(&delete(json!({ "agentId": id, "confirm": false })).await, 428, "confirmation_required");
    assert_ok("agents/inspect", &app.op("agents/inspect", &owner.token, None, json!({ "agentId": id })).await);
    let data = assert_ok("agents/delete", &delete(json!({ "agentId": id, "confirm": true })).await);
    assert_eq!(data, json!({ "agentId": id, "deleted": true }));
    assert_problem(
        &app.op("agents/inspect", &owner.token, None, json!({ "agentId": id })).await,
        404,
        "resource_not_found",
    );
    let list = assert_ok("agents/list", &app.op("agents/list", &owner.token, None, json!({})).await);
    assert_eq!(list["agents"], json!([]));
    assert_problem(&delete(json!({ "agentId": id, "confirm": true })).await, 404, "resource_not_found");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_agent_limit_is_enforced_and_nothing_is_written(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    for i in 0..3 {
        app.agent(&owner, &ws, &format!("A{i}")).await;
    }
    let body = assert_problem(
        &app.op("agents/create", &owner.token, None, json!({ "name": "Fourth" })).await,
        403,
        "limit_exceeded",
    );
    assert_eq!(body["error"]["details"], json!({ "limit": "agents", "max": 3, "current": 3, "requested": 1 }));
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 3);
    svc_core::admin::plan_set(&app.pool, &ws, "trial", &["agents=4".to_owned()]).await.unwrap();
    assert_ok("agents/create", &app.op("agents/create", &owner.token, None, json!({ "name": "Fourth" })).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_creates_cannot_pass_the_limit(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let responses = app
        .concurrently(8, |app, i| {
            let token = owner.token.clone();
            async move { app.op("agents/create", &token, None, json!({ "name": format!("Racer {i}") })).await }
        })
        .await;
    let created = responses.iter().filter(|r| r.status == 200).count();
    assert_eq!(created, 3);
    assert!(responses.iter().filter(|r| r.status != 200).all(|r| r.json()["error"]["code"] == "limit_exceeded"));
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 3);
}

#[sqlx::test(migrations = "../migrations")]
async fn an_inactive_entitlement_fails_closed(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let id = app.agent(&owner, &ws, "Helper").await;
    svc_core::admin::plan_set(&app.pool, &ws, "expired", &[]).await.unwrap();
    let cases = [
        ("agents/list", json!({})),
        ("agents/inspect", json!({ "agentId": id })),
        ("agents/create", json!({ "name": "New" })),
        ("agents/configure", json!({ "agentId": id, "name": "New" })),
    ];
    for (path, input) in cases {
        let body = assert_problem(&app.op(path, &owner.token, None, input).await, 403, "entitlement_required");
        assert_eq!(body["error"]["details"]["status"], "expired", "{path}");
    }
    // The Workspace itself and its Entitlement stay readable; deletion (no EN) works.
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &owner.token, None, json!({})).await);
    assert_ok(
        "workspaces/entitlements/inspect",
        &app.op("workspaces/entitlements/inspect", &owner.token, None, json!({})).await,
    );
    assert_ok(
        "agents/delete",
        &app.op("agents/delete", &owner.token, None, json!({ "agentId": id, "confirm": true })).await,
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn an_archived_workspace_keeps_reads_and_refuses_mutations(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let id = app.agent(&owner, &ws, "Helper").await;
    svc_core::admin::set_archived(&app.pool, &ws, true).await.unwrap();
    assert_ok("agents/list", &app.op("agents/list", &owner.token, None, json!({})).await);
    assert_ok("agents/inspect", &app.op("agents/inspect", &owner.token, None, json!({ "agentId": id })).await);
    for (path, input) in [
        ("agents/create", json!({ "name": "New" })),
        ("agents/configure", json!({ "agentId": id, "name": "New" })),
        ("agents/delete", json!({ "agentId": id, "confirm": true })),
    ] {
        assert_problem(&app.op(path, &owner.token, None, input).await, 409, "workspace_archived");
    }
    let data =
        assert_ok("agents/inspect", &app.op("agents/inspect", &owner.token, None, json!({ "agentId": id })).await);
    assert_eq!(data["agent"]["name"], "Helper");
}

#[sqlx::test(migrations = "../migrations")]
async fn another_tenants_agent_does_not_exist_for_you(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (alice, alice_ws) = app.owner("alice").await;
    let (mallory, _) = app.owner("mallory").await;
    let id = app.agent(&alice, &alice_ws, "Secret").await;
    let unknown = "agt_00000000000000000000000000";
    for (path, input) in [
        ("agents/inspect", json!({ "agentId": id })),
        ("agents/configure", json!({ "agentId": id, "name": "Pwned" })),
        ("agents/delete", json!({ "agentId": id, "confirm": true })),
    ] {
        let theirs =
            assert_problem(&app.op(path, &mallory.token, None, input.clone()).await, 404, "resource_not_found");
        let mut unknown_input = input;
        unknown_input["agentId"] = unknown.into();
        let missing =
            assert_problem(&app.op(path, &mallory.token, None, unknown_input).await, 404, "resource_not_found");
        assert_eq!(theirs["error"], missing["error"], "{path}: indistinguishable from an unknown id");
    }
    let list = assert_ok("agents/list", &app.op("agents/list", &mallory.token, None, json!({})).await);
    assert_eq!(list["agents"], json!([]));
    let data =
        assert_ok("agents/inspect", &app.op("agents/inspect", &alice.token, None, json!({ "agentId": id })).await);
    assert_eq!(data["agent"]["name"], "Secret", "untouched");
    // Naming Alice's Workspace does not help either.
    assert_problem(
        &app.op("agents/inspect", &mallory.token, Some(&alice_ws), json!({ "agentId": id })).await,
        400,
        "workspace_selection_required",
    );
}

/// An archive or plan change that commits after a request was authorized, but
/// before its mutation runs, still fails closed: limit-consuming mutations check
/// again on the row they lock.
#[sqlx::test(migrations = "../migrations")]
async fn changes_between_authorization_and_mutation_fail_closed(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let (owner, ws) = app.owner("alice").await;
    let state = svc_api::AppState::new(pool, &crate::helpers::config()).unwrap();
    let bearer = format!("Bearer {}", owner.token);
    let caller = state.service.authenticate(Some(&bearer), None).await.unwrap();
    let hints = svc_core::ClientHints::default();
    let create_agent = svc_contract::catalog::by_id("agent.create").unwrap();
    let create_key = svc_contract::catalog::by_id("api_key.create").unwrap();

    svc_core::admin::set_archived(&app.pool, &ws, true).await.unwrap();
    let problem = state.service.call(create_agent, &caller, json!({ "name": "Late" }), &hints).await.unwrap_err();
    assert_eq!(problem.code, svc_contract::ProblemCode::WorkspaceArchived);

    svc_core::admin::set_archived(&app.pool, &ws, false).await.unwrap();
    svc_core::admin::plan_set(&app.pool, &ws, "expired", &[]).await.unwrap();
    let problem = state.service.call(create_agent, &caller, json!({ "name": "Late" }), &hints).await.unwrap_err();
    assert_eq!(problem.code, svc_contract::ProblemCode::EntitlementRequired);
    let problem = state
        .service
        .call(create_key, &caller, json!({ "name": "k", "preset": "operator" }), &hints)
        .await
        .unwrap_err();
    assert_eq!(problem.code, svc_contract::ProblemCode::EntitlementRequired);
    assert_eq!(app.count("SELECT (SELECT count(*) FROM agents) + (SELECT count(*) FROM api_keys)").await, 0);
}
