//! Rules that hold across the whole catalog, checked operation by operation.

use serde_json::json;
use sqlx::PgPool;
use svc_contract::{CATALOG, WorkspaceRequirement};

use crate::api_keys::valid_input;
use crate::helpers::{TestApp, assert_ok, assert_problem};

/// Every operation that needs a Workspace refuses an ambiguous selection (two
/// Workspaces, no header) before anything else happens.
#[sqlx::test(migrations = "../migrations")]
async fn every_workspace_operation_needs_a_selection(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("alice").await;
    let first = app.workspace(&user, "First").await;
    app.workspace(&user, "Second").await;
    let agent = app.agent(&user, &first, "Helper").await;
    let required: Vec<_> = CATALOG.iter().filter(|op| op.workspace == WorkspaceRequirement::Required).collect();
    assert_eq!(required.len(), 27);
    for op in required {
        let response = app.op(op.path, &user.token, None, valid_input(op, &agent)).await;
        let body = assert_problem(&response, 400, "workspace_selection_required");
        assert_eq!(body["error"]["details"]["reason"], "ambiguous", "{}", op.id);
    }
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
}

/// Every mutation implemented so far answers `idempotency_conflict` when its key
/// was used for a different input, and changes nothing the second time.
#[sqlx::test(migrations = "../migrations")]
async fn every_mutation_guards_its_idempotency_key(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let agent = app.agent(&owner, &ws, "Helper").await;
    let (key_id, _) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let source = {
        let added = app
            .op("knowledge-sources/add", &owner.token, Some(&ws), crate::knowledge::add_input(&agent, "base", "Base."))
            .await;
        assert_ok("knowledge-sources/add", &added)["knowledgeSource"]["id"].as_str().unwrap().to_owned()
    };
    let replace = |content: &str| {
        let mut input = crate::knowledge::add_input(&agent, "unused", content);
        let object = input.as_object_mut().unwrap();
        object.remove("key");
        object.insert("sourceId".into(), json!(source));
        input
    };
    let manifest =
        |sources: serde_json::Value| json!({ "agentId": agent, "manifest": { "version": 1, "sources": sources } });
    let (revoke_id, _) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    // Public Chat and Widget calls aim at an Agent that outlives the loop.
    let chat = app.agent(&owner, &ws, "Chat").await;
    let cases = [
        ("workspaces/create", json!({ "name": "One" }), json!({ "name": "Two" })),
        ("workspaces/rename", json!({ "name": "One" }), json!({ "name": "Two" })),
        ("agents/create", json!({ "name": "One" }), json!({ "name": "Two" })),
        ("agents/configure", json!({ "agentId": agent, "name": "One" }), json!({ "agentId": agent, "name": "Two" })),
        (
            "api-keys/create",
            json!({ "name": "one", "preset": "operator" }),
            json!({ "name": "two", "preset": "operator" }),
        ),
        ("api-keys/rotate", json!({ "apiKeyId": key_id }), json!({ "apiKeyId": revoke_id })),
        (
            "api-keys/revoke",
            json!({ "apiKeyId": revoke_id, "confirm": true }),
            json!({ "apiKeyId": key_id, "confirm": true }),
        ),
        (
            "knowledge-sources/add",
            crate::knowledge::add_input(&agent, "one", "One."),
            crate::knowledge::add_input(&agent, "two", "Two."),
        ),
        ("knowledge-sources/replace", replace("Replaced once."), replace("Replaced twice.")),
        ("knowledge-sources/reconcile", manifest(json!([])), manifest(json!([{ "key": "gone", "tombstone": true }]))),
        (
            "public-chats/enable",
            json!({ "agentId": chat, "website": "https://one.example" }),
            json!({ "agentId": chat, "website": "https://two.example" }),
        ),
        (
            "public-chats/disable",
            json!({ "agentId": chat, "confirm": chat }),
            json!({ "agentId": agent, "confirm": agent }),
        ),
        (
            "widgets/configure",
            json!({ "agentId": chat, "configuration": { "allowedOrigins": ["https://one.example"] } }),
            json!({ "agentId": chat, "configuration": { "allowedOrigins": ["https://two.example"] } }),
        ),
        (
            "knowledge-sources/delete",
            json!({ "agentId": agent, "sourceId": source, "tombstone": true, "prune": true, "confirm": source }),
            json!({ "agentId": agent, "sourceId": "ks_00000000000000000000000000", "tombstone": true, "prune": true, "confirm": "ks_00000000000000000000000000" }),
        ),
        (
            "agents/delete",
            json!({ "agentId": agent, "confirm": true }),
            json!({ "agentId": "agt_00000000000000000000000000", "confirm": true }),
        ),
    ];
    for (i, (path, first, second)) in cases.into_iter().enumerate() {
        let key = format!("conflict-key-{i}");
        let with_key = |mut input: serde_json::Value| {
            input["idempotencyKey"] = key.clone().into();
            input
        };
        assert_ok(path, &app.op(path, &owner.token, Some(&ws), with_key(first)).await);
        let everything = "SELECT (SELECT count(*) FROM agents WHERE deleted_at IS NULL) + (SELECT count(*) FROM api_keys) \
            + (SELECT count(*) FROM workspaces) + (SELECT count(*) FROM knowledge_revisions) \
            + (SELECT count(*) FROM knowledge_sources WHERE deleted_at IS NULL) + (SELECT count(*) FROM reconcile_runs) \
            + (SELECT count(*) FROM public_chats) + (SELECT count(*) FROM widget_configurations)";
        let before = app.count(everything).await;
        let body =
            assert_problem(&app.op(path, &owner.token, Some(&ws), with_key(second)).await, 409, "idempotency_conflict");
        assert_eq!(body["error"]["details"]["reason"], "key_reused", "{path}");
        let after = app.count(everything).await;
        assert_eq!(before, after, "{path} changed nothing");
    }
    // The conflicting revoke did not revoke `key_id`: the active keys are it, its
    // rotated successor and "one".
    let list = assert_ok("api-keys/list", &app.op("api-keys/list", &owner.token, Some(&ws), json!({})).await);
    let active: Vec<&str> = list["apiKeys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["revokedAt"].is_null())
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(active.len(), 3);
    assert!(active.contains(&key_id.as_str()));
    // The conflicting Public Chat and Widget calls did not run either.
    let chat_input = json!({ "agentId": chat });
    let public_chat = assert_ok(
        "public-chats/inspect",
        &app.op("public-chats/inspect", &owner.token, Some(&ws), chat_input.clone()).await,
    );
    assert_eq!(
        (public_chat["publicChat"]["enabled"].clone(), public_chat["publicChat"]["website"].clone()),
        (json!(false), json!("https://one.example"))
    );
    let widget = assert_ok("widgets/inspect", &app.op("widgets/inspect", &owner.token, Some(&ws), chat_input).await);
    assert_eq!(widget["configuration"]["allowedOrigins"], json!(["https://one.example"]));
}
