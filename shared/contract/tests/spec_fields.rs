//! Every operation's output has exactly the fields the spec lists ("every
//! object in results has no extra properties beyond those listed"), at every
//! depth: the expected shapes below are written from
//! `docs/spec/tenant-operations-spec.md`, not from the code, so a field added
//! to an output type (or dropped from one) fails here.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use svc_contract::CATALOG;

/// The property names of a schema, recursively: an object's properties, an
/// array's items, a union's branches merged. Anything else (a string, a
/// number, a map of string to number) is a leaf, `null`.
fn shape(schema: &Value) -> Value {
    for union in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(union).and_then(Value::as_array) {
            let shapes: Vec<Value> = branches.iter().map(shape).filter(|s| !s.is_null()).collect();
            return match shapes.as_slice() {
                [] => Value::Null,
                [one] => one.clone(),
                _ => {
                    let mut merged = serde_json::Map::new();
                    for s in shapes {
                        if let Value::Object(members) = s {
                            merged.extend(members);
                        }
                    }
                    Value::Object(merged)
                }
            };
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        return Value::Object(properties.iter().map(|(k, v)| (k.clone(), shape(v))).collect());
    }
    if let Some(items) = schema.get("items") {
        return json!([shape(items)]);
    }
    Value::Null
}

/// The spec's resources, as shapes.
fn resources() -> BTreeMap<&'static str, Value> {
    let revision = json!({
        "id": null, "revision": null, "digest": null, "state": null, "importedAt": null, "errorCode": null
    });
    let knowledge_source = json!({
        "id": null, "workspaceId": null, "agentId": null, "key": null, "title": null,
        "provenance": { "kind": null, "uri": null },
        "revision": null, "digest": null, "required": null, "importedAt": null, "state": null,
        "activeRevision": revision, "pendingRevision": revision
    });
    let widget_configuration = json!({
        "allowedOrigins": [null],
        "legacyAllowedDomains": [null],
        "legacyAllowsAnyOrigin": null,
        "showBranding": null,
        "defaultLanguage": null,
        "website": null,
        "appearance": {
            "headline": null, "description": null, "welcomeMessage": null, "brandColor": null, "theme": null,
            "orientation": null, "logoUrl": null, "bubbleStyle": null, "bubbleLabel": null, "useBrandColor": null
        },
        "behavior": {
            "instructions": null,
            "conversationTemperature": null,
            "conversationCreativity": null,
            "welcomePopup": { "enabled": null, "seconds": null, "message": null },
            "collectUserInfo": { "enabled": null, "message": null },
            "leadCapture": {
                "enabled": null, "contactEmail": null, "calendarLink": null, "phoneNumber": null,
                "customMessage": null, "emailNotificationEnabled": null
            },
            "predefinedQuestions": [{ "question": null, "order": null }]
        }
    });
    BTreeMap::from([
        ("Workspace", json!({ "id": null, "name": null, "slug": null, "role": null, "status": null })),
        (
            "Agent",
            json!({
                "id": null, "workspaceId": null, "name": null, "slug": null, "status": null, "defaultLanguage": null,
                "configuration": { "instructions": null, "temperature": null }
            }),
        ),
        (
            "ApiKey",
            json!({
                "id": null, "workspaceId": null, "name": null, "keyPrefix": null, "preset": null, "scopes": [null],
                "lastUsedAt": null, "createdAt": null, "revokedAt": null, "rotatedFromId": null
            }),
        ),
        ("KnowledgeSource", knowledge_source),
        ("PublicChat", json!({ "agentId": null, "enabled": null, "url": null, "website": null })),
        ("WidgetConfiguration", widget_configuration),
    ])
}

/// What the spec lists under `data` for each operation.
fn expected(id: &str) -> Value {
    let r = resources();
    let ws = || r["Workspace"].clone();
    let agent = || r["Agent"].clone();
    let key = || r["ApiKey"].clone();
    let source = || r["KnowledgeSource"].clone();
    let chat = || r["PublicChat"].clone();
    let configuration = || r["WidgetConfiguration"].clone();
    let created_key = || json!({ "apiKey": key(), "secret": null, "secretReturned": null });
    match id {
        "identity.status" => json!({
            "client": { "version": null, "endpoint": null },
            "auth": { "mode": null, "secretLocation": null, "expiresAt": null },
            "user": { "id": null, "email": null, "name": null },
            "workspace": { "id": null, "name": null, "slug": null, "role": null, "status": null },
            "credential": { "keyPrefix": null, "scopes": [null] },
            "availability": { "api": null, "mcp": null },
            "status": null
        }),
        "workspace.list" => json!({ "workspaces": [ws()] }),
        "workspace.inspect" | "workspace.create" | "workspace.rename" => json!({ "workspace": ws() }),
        "workspace.entitlements.inspect" => json!({ "entitlement": {
            "workspaceId": null, "plan": null, "planName": null, "status": null, "active": null,
            "features": [null], "limits": null, "usage": null,
            "channels": { "allowed": [null], "maxActive": null },
            "trialEnd": null, "periodEnd": null, "cancelAtPeriodEnd": null
        }}),
        "agent.list" => json!({ "agents": [agent()] }),
        "agent.inspect" | "agent.create" | "agent.configure" => json!({ "agent": agent() }),
        "agent.delete" => json!({ "agentId": null, "deleted": null }),
        "api_key.list" => json!({ "apiKeys": [key()] }),
        "api_key.create" | "api_key.rotate" => created_key(),
        "api_key.revoke" => json!({ "apiKey": key() }),
        "knowledge_source.list" => json!({ "knowledgeSources": [source()] }),
        "knowledge_source.inspect" | "knowledge_source.add" | "knowledge_source.replace" => {
            json!({ "knowledgeSource": source() })
        }
        "knowledge_source.wait" => json!({ "knowledgeSource": source(), "terminal": null, "retryAfterMs": null }),
        "knowledge_source.reconcile" => json!({
            "runId": null, "status": null, "dryRun": null, "checkpoint": null, "errorCode": null,
            "plan": [{ "key": null, "sourceId": null, "action": null }],
            "knowledgeSources": [source()]
        }),
        "knowledge_source.delete" => json!({ "sourceId": null, "deleted": null }),
        "public_chat.inspect" | "public_chat.enable" | "public_chat.disable" => json!({ "publicChat": chat() }),
        "public_chat.url" => json!({ "agentId": null, "url": null }),
        "widget.inspect" | "widget.configure" => json!({ "agentId": null, "configuration": configuration() }),
        "widget.manifest" => json!({
            "workspace": { "id": null, "slug": null },
            "agent": { "id": null, "slug": null },
            "package": { "packageName": null, "version": null, "component": null, "agentIdProp": null },
            "configuration": configuration(),
            "publicChat": chat()
        }),
        "widget.verify" => json!({
            "agentId": null, "origin": null, "configuration": configuration(),
            "checks": {
                "agent": null, "configuration": null, "origin": null, "knowledge": null, "publicChat": null,
                "answer": null
            },
            "answer": null
        }),
        other => panic!("{other}: an operation the spec does not list"),
    }
}

#[test]
fn every_operations_output_has_exactly_the_fields_the_spec_lists() {
    let mut wrong = Vec::new();
    for op in &CATALOG {
        let schema = Value::Object(op.output_schema().clone());
        let data = shape(&schema["properties"]["data"]);
        let spec = expected(op.id);
        if data != spec {
            wrong.push(format!("{}:\n  code: {data}\n  spec: {spec}", op.id));
        }
    }
    assert!(wrong.is_empty(), "outputs that differ from the spec:\n{}", wrong.join("\n"));
}

/// The check itself sees an extra field, a missing one and a nested one.
#[test]
fn the_shape_comparison_sees_extra_missing_and_nested_fields() {
    let manifest = Value::Object(svc_contract::OperationId::WidgetManifest.operation().output_schema().clone());
    let data = shape(&manifest["properties"]["data"]);
    let mut extra = data.clone();
    extra["baseUrl"] = Value::Null;
    let mut missing = data.clone();
    missing.as_object_mut().map(|m| m.remove("package"));
    let mut nested = data.clone();
    nested["publicChat"]["secret"] = Value::Null;
    for changed in [extra, missing, nested] {
        assert_ne!(changed, expected("widget.manifest"));
    }
    assert_eq!(data, expected("widget.manifest"));
}
