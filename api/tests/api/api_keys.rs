//! Workspace API keys: management, authentication and least privilege.

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_contract::{AuthKind, CATALOG, Operation, Scope};

use crate::helpers::{TestApp, assert_ok, assert_problem};

#[sqlx::test(migrations = "../migrations")]
async fn create_returns_the_secret_once_and_stores_only_its_hash(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let response = app.op("api-keys/create", &owner.token, None, json!({ "name": "CI", "preset": "read_only" })).await;
    let data = assert_ok("api-keys/create", &response);
    let secret = data["secret"].as_str().unwrap().to_owned();
    let key = &data["apiKey"];
    assert_eq!(data["secretReturned"], true);
    assert!(key["id"].as_str().unwrap().starts_with("ak_"));
    assert_eq!(key["workspaceId"], ws);
    assert_eq!(key["name"], "CI");
    assert_eq!(key["preset"], "read_only");
    assert_eq!(
        key["scopes"],
        json!(["workspace:read", "agent:read", "knowledge_source:read", "public_chat:read", "widget:read"])
    );
    let prefix = key["keyPrefix"].as_str().unwrap();
    assert!(prefix.starts_with("svck_") && prefix.len() == 13, "{prefix}");
    assert!(secret.starts_with(&format!("{prefix}_")) && secret.len() == 46, "the contract's format");
    assert_eq!(
        (key["lastUsedAt"].clone(), key["revokedAt"].clone(), key["rotatedFromId"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
    assert!(key["createdAt"].as_i64().unwrap() > 1_700_000_000_000);

    // Listed without the secret.
    let list = app.op("api-keys/list", &owner.token, None, json!({})).await;
    let listed = assert_ok("api-keys/list", &list);
    assert_eq!(listed["apiKeys"], json!([key]));
    assert!(!list.text().contains(&secret));
    // At rest: the SHA-256 only.
    let row: (Vec<u8>, String) = sqlx::query_as("SELECT secret_hash, row_to_json(api_keys)::text FROM api_keys")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(row.0, svc_core::auth::api_key::hash(&secret));
    assert!(!row.1.contains(&secret[14..]), "no part of the random secret is stored");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_replay_returns_the_key_without_its_secret(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let input = json!({ "name": "CI", "scopes": ["agent:read"], "idempotencyKey": "create-key-1" });
    let first = assert_ok("api-keys/create", &app.op("api-keys/create", &owner.token, None, input.clone()).await);
    let replay = app.op("api-keys/create", &owner.token, None, input).await;
    let second = assert_ok("api-keys/create", &replay);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(second["apiKey"], first["apiKey"]);
    assert_eq!((second["secret"].clone(), second["secretReturned"].clone()), (Value::Null, json!(false)));
    assert!(first["secret"].is_string());
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 1);
    let stored: String =
        sqlx::query_scalar("SELECT response::text FROM idempotency_records").fetch_one(&app.pool).await.unwrap();
    assert!(!stored.contains(first["secret"].as_str().unwrap()), "the secret is never stored for replay");
}

#[sqlx::test(migrations = "../migrations")]
async fn create_input_rules(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let data = assert_ok(
        "api-keys/create",
        &app.op(
            "api-keys/create",
            &owner.token,
            None,
            json!({ "name": "x".repeat(50), "scopes": ["widget:write", "agent:read", "agent:read"] }),
        )
        .await,
    );
    assert_eq!(data["apiKey"]["scopes"], json!(["agent:read", "widget:write"]), "collapsed, in the spec's order");
    assert_eq!(data["apiKey"]["preset"], Value::Null);
    let operator = assert_ok(
        "api-keys/create",
        &app.op("api-keys/create", &owner.token, None, json!({ "name": "op", "preset": "operator" })).await,
    );
    assert_eq!(operator["apiKey"]["scopes"].as_array().unwrap().len(), 9);
    for (input, path) in [
        (json!({ "name": "x".repeat(51), "preset": "operator" }), "/name"),
        (json!({ "name": "", "preset": "operator" }), "/name"),
        (json!({ "name": "x".repeat(121), "preset": "operator" }), "/name"),
        (json!({ "name": "k", "scopes": [] }), "/scopes"),
        (json!({ "name": "k", "scopes": ["agent:admin"] }), "/scopes/0"),
        (json!({ "name": "k", "preset": "admin" }), "/preset"),
        (json!({ "name": "k", "preset": "operator", "scopes": ["agent:read"] }), ""),
        (json!({ "name": "k" }), ""),
        (json!({ "preset": "operator" }), "/name"),
    ] {
        let body =
            assert_problem(&app.op("api-keys/create", &owner.token, None, input.clone()).await, 400, "invalid_request");
        assert_eq!(body["error"]["details"]["issues"][0]["path"], path, "{input}");
    }
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_key_authenticates_as_itself_on_its_workspace(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (_, secret) = app.api_key(&owner, &ws, json!({ "scopes": ["agent:read", "workspace:read"] })).await;
    let response = app.op("identity/status", &secret, None, json!({})).await;
    let data = assert_ok("identity/status", &response);
    assert_eq!(data["auth"], json!({ "mode": "workspace_api_key", "secretLocation": "unknown", "expiresAt": null }));
    assert_eq!(data["user"], Value::Null);
    assert_eq!(
        data["workspace"],
        json!({ "id": ws, "name": "alice workspace", "slug": "alice-workspace", "role": null, "status": "active" })
    );
    assert_eq!(data["credential"]["keyPrefix"], secret[..13]);
    assert_eq!(data["credential"]["scopes"], json!(["workspace:read", "agent:read"]));
    assert!(!response.text().contains(&secret), "the result never exposes the credential");
    let ws_view = assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, None, json!({})).await);
    assert_eq!(ws_view["workspace"]["role"], Value::Null);
    // Naming its own Workspace is fine, by id or slug; any other is refused.
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, Some(&ws), json!({})).await);
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, Some("alice-workspace"), json!({})).await);
    let (_other, other_ws) = app.owner("bob").await;
    for header in [other_ws.as_str(), "bob-workspace", "no-such-workspace"] {
        let body = assert_problem(
            &app.op("workspaces/inspect", &secret, Some(header), json!({})).await,
            403,
            "permission_denied",
        );
        assert_eq!(body["error"]["details"]["reason"], "foreign_workspace");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn last_used_at_moves_at_most_once_a_minute(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (_, secret) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let last_used = || async {
        let list = assert_ok("api-keys/list", &app.op("api-keys/list", &owner.token, None, json!({})).await);
        list["apiKeys"][0]["lastUsedAt"].clone()
    };
    assert_eq!(last_used().await, Value::Null);
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, None, json!({})).await);
    let first = last_used().await;
    assert!(first.is_i64());
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, None, json!({})).await);
    assert_eq!(last_used().await, first, "a second use within the minute writes nothing");
    sqlx::query("UPDATE api_keys SET last_used_at = last_used_at - interval '61 seconds'")
        .execute(&app.pool)
        .await
        .unwrap();
    let backdated = last_used().await;
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, None, json!({})).await);
    assert!(last_used().await.as_i64().unwrap() > backdated.as_i64().unwrap());
}

/// An input each operation's schema accepts, aimed at `agent` where one is needed.
pub fn valid_input(op: &Operation, agent: &str) -> Value {
    let digest = format!("sha256:{}", "0".repeat(64));
    let source = json!({ "key": "k", "title": "t", "provenance": { "kind": "manual", "uri": "u" }, "revision": "r", "digest": digest, "content": "c" });
    let mut input = match op.id {
        "identity.status"
        | "workspace.inspect"
        | "workspace.entitlements.inspect"
        | "workspace.list"
        | "agent.list"
        | "api_key.list" => json!({}),
        "workspace.create" | "workspace.rename" | "agent.create" => json!({ "name": "New" }),
        "agent.inspect" | "public_chat.inspect" | "public_chat.url" | "widget.inspect" | "widget.manifest" => {
            json!({ "agentId": agent })
        }
        "agent.configure" => json!({ "agentId": agent, "temperature": 1 }),
        "agent.delete" => json!({ "agentId": agent }),
        "api_key.create" => json!({ "name": "k", "preset": "read_only" }),
        "api_key.rotate" | "api_key.revoke" => json!({ "apiKeyId": "ak_00000000000000000000000000" }),
        "knowledge_source.list" => json!({ "agentId": agent }),
        "knowledge_source.inspect" | "knowledge_source.wait" | "knowledge_source.delete" => {
            json!({ "agentId": agent, "sourceId": "ks_1" })
        }
        "knowledge_source.add" => {
            let mut add = source.clone();
            add["agentId"] = agent.into();
            add
        }
        "knowledge_source.replace" => {
            let mut replace = source.clone();
            replace.as_object_mut().unwrap().remove("key");
            replace["agentId"] = agent.into();
            replace["sourceId"] = "ks_1".into();
            replace
        }
        "knowledge_source.reconcile" => json!({ "agentId": agent, "manifest": { "version": 1, "sources": [] } }),
        "public_chat.enable" => json!({ "agentId": agent }),
        "public_chat.disable" => json!({ "agentId": agent }),
        "widget.configure" => json!({ "agentId": agent, "configuration": {} }),
        "widget.verify" => json!({ "agentId": agent, "origin": "https://example.com" }),
        other => panic!("no example input for {other}"),
    };
    if op.id == "agent.delete" {
        input["confirm"] = false.into();
    }
    input
}

/// What an allowed call with [`valid_input`] answers: its result, or the
/// problem its input earns past authorization (a made-up id, no confirmation,
/// a digest that is not the content's).
fn allowed_outcome(id: &str) -> &'static str {
    match id {
        "agent.delete" | "knowledge_source.delete" | "public_chat.disable" => "confirmation_required",
        "knowledge_source.inspect" | "knowledge_source.wait" | "knowledge_source.replace" => "resource_not_found",
        "knowledge_source.add" => "invalid_request",
        "widget.verify" => "processing_failed",
        _ => "ok",
    }
}

/// For every operation and every scope, a key with only that scope is allowed
/// exactly where contract §5's table says; refused calls change nothing.
#[sqlx::test(migrations = "../migrations")]
async fn every_operation_checks_the_scope_the_catalog_names(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let agent = app.agent(&owner, &ws, "Helper").await;
    let mut keys = Vec::new();
    for scope in Scope::ALL {
        keys.push((scope, app.api_key(&owner, &ws, json!({ "name": scope.as_str(), "scopes": [scope] })).await.1));
    }
    let expected_scope = |id: &str| -> Option<Option<&str>> {
        // None: API keys may not call it at all; Some(None): any key may.
        match id {
            "identity.status" => Some(None),
            "workspace.inspect" => Some(Some("workspace:read")),
            "agent.list" | "agent.inspect" => Some(Some("agent:read")),
            "agent.create" | "agent.configure" | "agent.delete" => Some(Some("agent:write")),
            "knowledge_source.list" | "knowledge_source.inspect" | "knowledge_source.wait" => {
                Some(Some("knowledge_source:read"))
            }
            "knowledge_source.add"
            | "knowledge_source.replace"
            | "knowledge_source.delete"
            | "knowledge_source.reconcile" => Some(Some("knowledge_source:write")),
            "public_chat.inspect" | "public_chat.url" => Some(Some("public_chat:read")),
            "public_chat.enable" | "public_chat.disable" => Some(Some("public_chat:write")),
            "widget.inspect" | "widget.manifest" => Some(Some("widget:read")),
            "widget.configure" | "widget.verify" => Some(Some("widget:write")),
            _ => None,
        }
    };
    let agents_before = app.count("SELECT count(*) FROM agents").await;
    let mut checked = 0;
    for op in &CATALOG {
        for (scope, secret) in &keys {
            let response = app.op(op.path, secret, None, valid_input(op, &agent)).await;
            let body = response.json();
            let code = body["error"]["code"].as_str().unwrap_or("ok");
            let reason = body["error"]["details"]["reason"].as_str().unwrap_or_default();
            match expected_scope(op.id) {
                None => {
                    assert!(!op.allows(AuthKind::WorkspaceApiKey));
                    assert_eq!(
                        (code, reason),
                        ("permission_denied", "user_session_required"),
                        "{} with {scope}",
                        op.id
                    );
                }
                Some(Some(needed)) if needed != scope.as_str() => {
                    assert_eq!((code, reason), ("permission_denied", "missing_scope"), "{} with {scope}", op.id);
                    assert_eq!(body["error"]["details"]["requiredScope"], needed);
                }
                Some(_) => assert_eq!(code, allowed_outcome(op.id), "{} with {scope}: {body}", op.id),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 30 * 9);
    // Only agent:write could create (once, at the agent.create row).
    assert_eq!(app.count("SELECT count(*) FROM agents").await, agents_before + 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_key_cannot_reach_another_workspace(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (alice, alice_ws) = app.owner("alice").await;
    let (bob, bob_ws) = app.owner("bob").await;
    let bobs_agent = app.agent(&bob, &bob_ws, "Private").await;
    let (_, secret) = app.api_key(&alice, &alice_ws, json!({ "preset": "operator" })).await;
    assert_problem(
        &app.op("agents/inspect", &secret, None, json!({ "agentId": bobs_agent })).await,
        404,
        "resource_not_found",
    );
    assert_problem(
        &app.op("agents/delete", &secret, None, json!({ "agentId": bobs_agent, "confirm": true })).await,
        404,
        "resource_not_found",
    );
    assert_problem(
        &app.op("agents/inspect", &secret, Some(&bob_ws), json!({ "agentId": bobs_agent })).await,
        403,
        "permission_denied",
    );
    let list = assert_ok("agents/list", &app.op("agents/list", &secret, None, json!({})).await);
    assert_eq!(list["agents"], json!([]));
    assert_ok("agents/inspect", &app.op("agents/inspect", &bob.token, None, json!({ "agentId": bobs_agent })).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn only_admins_and_owners_manage_keys(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (key_id, _) = app.api_key(&owner, &ws, json!({ "preset": "read_only" })).await;
    let member = app.user("bob").await;
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "bob", "member").await.unwrap();
    for (path, input) in [
        ("api-keys/list", json!({})),
        ("api-keys/create", json!({ "name": "mine", "preset": "operator" })),
        ("api-keys/rotate", json!({ "apiKeyId": key_id })),
        ("api-keys/revoke", json!({ "apiKeyId": key_id, "confirm": true })),
    ] {
        let body = assert_problem(&app.op(path, &member.token, None, input).await, 403, "permission_denied");
        assert_eq!(body["error"]["details"]["reason"], "role_required", "{path}");
    }
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").await, 1);
    svc_core::admin::member_add(&app.pool, &ws, svc_tests::ISSUER, "bob", "admin").await.unwrap();
    assert_ok("api-keys/list", &app.op("api-keys/list", &member.token, None, json!({})).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn rotation_makes_a_successor_and_keeps_the_old_key_until_revoked(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (old_id, old_secret) =
        app.api_key(&owner, &ws, json!({ "name": "deploy", "scopes": ["agent:write", "agent:read"] })).await;
    let data = assert_ok(
        "api-keys/rotate",
        &app.op("api-keys/rotate", &owner.token, None, json!({ "apiKeyId": old_id })).await,
    );
    let new_secret = data["secret"].as_str().unwrap().to_owned();
    assert_eq!(data["secretReturned"], true);
    let new = &data["apiKey"];
    assert_ne!(new["id"], old_id);
    assert_eq!(new["rotatedFromId"], old_id);
    assert_eq!((new["name"].as_str(), new["preset"].clone()), (Some("deploy"), Value::Null));
    assert_eq!(new["scopes"], json!(["agent:read", "agent:write"]));
    assert_ne!(new_secret, old_secret);
    for secret in [&old_secret, &new_secret] {
        assert_ok("agents/list", &app.op("agents/list", secret, None, json!({})).await);
    }
    // Revoke the old one: it stops, its successor goes on.
    assert_problem(
        &app.op("api-keys/revoke", &owner.token, None, json!({ "apiKeyId": old_id })).await,
        428,
        "confirmation_required",
    );
    assert_problem(
        &app.op("api-keys/revoke", &owner.token, None, json!({ "apiKeyId": old_id, "confirm": false })).await,
        428,
        "confirmation_required",
    );
    assert_ok("agents/list", &app.op("agents/list", &old_secret, None, json!({})).await);
    let revoked = assert_ok(
        "api-keys/revoke",
        &app.op("api-keys/revoke", &owner.token, None, json!({ "apiKeyId": old_id, "confirm": true })).await,
    );
    assert!(revoked["apiKey"]["revokedAt"].is_i64());
    assert!(revoked.get("secret").is_none());
    let body =
        assert_problem(&app.op("agents/list", &old_secret, None, json!({})).await, 401, "authentication_required");
    assert_eq!(body["error"]["details"]["reason"], "api_key_revoked");
    assert!(!body.to_string().contains(&old_secret), "error bodies never echo the key");
    assert_ok("agents/list", &app.op("agents/list", &new_secret, None, json!({})).await);
    // Nothing more can be done with the revoked key.
    for (path, input) in [
        ("api-keys/revoke", json!({ "apiKeyId": old_id, "confirm": true })),
        ("api-keys/rotate", json!({ "apiKeyId": old_id })),
    ] {
        let body = assert_problem(&app.op(path, &owner.token, None, input.clone()).await, 400, "invalid_request");
        assert_eq!(body["error"]["details"]["reason"], "api_key_revoked");
        // ... and the key itself cannot even authenticate to try.
        assert_problem(&app.op(path, &old_secret, None, input).await, 401, "authentication_required");
    }
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_api_key_limit_counts_active_keys(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.api_key(&owner, &ws, json!({ "name": format!("k{i}"), "preset": "read_only" })).await.0);
    }
    let body = assert_problem(
        &app.op("api-keys/create", &owner.token, None, json!({ "name": "k5", "preset": "read_only" })).await,
        403,
        "limit_exceeded",
    );
    assert_eq!(body["error"]["details"], json!({ "limit": "api_keys", "max": 5, "current": 5, "requested": 1 }));
    let body = assert_problem(
        &app.op("api-keys/rotate", &owner.token, None, json!({ "apiKeyId": ids[0] })).await,
        403,
        "limit_exceeded",
    );
    assert_eq!(body["error"]["details"]["limit"], "api_keys");
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 5);
    assert_ok(
        "api-keys/revoke",
        &app.op("api-keys/revoke", &owner.token, None, json!({ "apiKeyId": ids[0], "confirm": true })).await,
    );
    assert_ok("api-keys/rotate", &app.op("api-keys/rotate", &owner.token, None, json!({ "apiKeyId": ids[1] })).await);
    let usage = assert_ok(
        "workspaces/entitlements/inspect",
        &app.op("workspaces/entitlements/inspect", &owner.token, None, json!({})).await,
    );
    assert_eq!(usage["entitlement"]["usage"]["api_keys"], 5);
}

#[sqlx::test(migrations = "../migrations")]
async fn inactive_or_archived_workspaces(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let (id, secret) = app.api_key(&owner, &ws, json!({ "preset": "operator" })).await;
    svc_core::admin::plan_set(&app.pool, &ws, "expired", &[]).await.unwrap();
    assert_problem(
        &app.op("api-keys/create", &owner.token, None, json!({ "name": "n", "preset": "operator" })).await,
        403,
        "entitlement_required",
    );
    assert_problem(
        &app.op("api-keys/rotate", &owner.token, None, json!({ "apiKeyId": id })).await,
        403,
        "entitlement_required",
    );
    // Entitlement loss fails closed for the key too; authentication never widens authority.
    assert_problem(&app.op("agents/list", &secret, None, json!({})).await, 403, "entitlement_required");
    svc_core::admin::plan_set(&app.pool, &ws, "trial", &[]).await.unwrap();
    svc_core::admin::set_archived(&app.pool, &ws, true).await.unwrap();
    assert_problem(
        &app.op("api-keys/create", &owner.token, None, json!({ "name": "n", "preset": "operator" })).await,
        409,
        "workspace_archived",
    );
    assert_problem(
        &app.op("api-keys/rotate", &owner.token, None, json!({ "apiKeyId": id })).await,
        409,
        "workspace_archived",
    );
    assert_problem(&app.op("agents/create", &secret, None, json!({ "name": "n" })).await, 409, "workspace_archived");
    // The owner can still see and lock down what is there.
    assert_ok("api-keys/list", &app.op("api-keys/list", &owner.token, None, json!({})).await);
    assert_ok(
        "api-keys/revoke",
        &app.op("api-keys/revoke", &owner.token, None, json!({ "apiKeyId": id, "confirm": true })).await,
    );
    assert_eq!(app.count("SELECT count(*) FROM api_keys").await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn another_tenants_key_ids_name_nothing(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (alice, alice_ws) = app.owner("alice").await;
    let (mallory, _) = app.owner("mallory").await;
    let (id, secret) = app.api_key(&alice, &alice_ws, json!({ "preset": "read_only" })).await;
    for (path, input) in [
        ("api-keys/rotate", json!({ "apiKeyId": id })),
        ("api-keys/revoke", json!({ "apiKeyId": id, "confirm": true })),
        ("api-keys/revoke", json!({ "apiKeyId": "not-a-key-id", "confirm": true })),
    ] {
        assert_problem(&app.op(path, &mallory.token, None, input).await, 404, "resource_not_found");
    }
    let list = assert_ok("api-keys/list", &app.op("api-keys/list", &mallory.token, None, json!({})).await);
    assert_eq!(list["apiKeys"], json!([]));
    assert_ok("workspaces/inspect", &app.op("workspaces/inspect", &secret, None, json!({})).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn keys_are_paged(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(app.api_key(&owner, &ws, json!({ "name": format!("k{i}"), "preset": "read_only" })).await.0);
    }
    let first = app.op("api-keys/list", &owner.token, None, json!({ "pageSize": 2 })).await;
    let cursor = first.json()["meta"]["nextCursor"].as_str().unwrap().to_owned();
    let second = app.op("api-keys/list", &owner.token, None, json!({ "pageSize": 2, "cursor": cursor })).await;
    let seen: Vec<String> = [assert_ok("api-keys/list", &first), assert_ok("api-keys/list", &second)]
        .iter()
        .flat_map(|d| {
            d["apiKeys"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen, ids);
}

/// The lifecycle over MCP: a User manages keys with tools, the key works as an
/// MCP credential, and once revoked is refused before any JSON-RPC is read.
#[sqlx::test(migrations = "../migrations")]
async fn lifecycle_over_mcp(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (owner, _ws) = app.owner("alice").await;
    let call = |token: String, tool: &'static str, args: Value| {
        let app = app.clone();
        async move {
            let response = app.tool(&token, None, tool, args).await;
            assert_eq!(response.status, 200, "{}", response.text());
            response.json()["result"]["structuredContent"].clone()
        }
    };
    let created =
        call(owner.token.clone(), "svc_api_key_create", json!({ "name": "agent", "preset": "operator" })).await;
    let secret = created["data"]["secret"].as_str().unwrap().to_owned();
    let key_id = created["data"]["apiKey"]["id"].as_str().unwrap().to_owned();
    let status = call(secret.clone(), "svc_identity_status", json!({})).await;
    assert_eq!(status["data"]["auth"]["mode"], "workspace_api_key");
    assert_eq!(status["data"]["credential"]["scopes"].as_array().unwrap().len(), 9);
    let refused = call(secret.clone(), "svc_api_key_list", json!({})).await;
    assert_eq!(refused["error"]["code"], "permission_denied");
    let rotated = call(owner.token.clone(), "svc_api_key_rotate", json!({ "apiKeyId": key_id })).await;
    let successor = rotated["data"]["secret"].as_str().unwrap().to_owned();
    assert_eq!(rotated["data"]["apiKey"]["rotatedFromId"], key_id);
    let revoked = call(owner.token.clone(), "svc_api_key_revoke", json!({ "apiKeyId": key_id, "confirm": true })).await;
    assert!(revoked["data"]["apiKey"]["revokedAt"].is_i64());
    let response = app.tool(&secret, None, "svc_identity_status", json!({})).await;
    let body = assert_problem(&response, 401, "authentication_required");
    assert_eq!(body["error"]["details"]["reason"], "api_key_revoked");
    let status = call(successor, "svc_agent_list", json!({})).await;
    assert_eq!(status["data"]["agents"], json!([]));
}
