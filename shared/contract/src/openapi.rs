//! The OpenAPI 3.1 document, generated from the catalog.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::catalog::{CATALOG, Operation, WorkspaceRequirement};
use crate::problem::ProblemCode;
use crate::{CONTRACT_VERSION, catalog};

/// Where operations live below the base URL.
pub const OPERATIONS_PREFIX: &str = "/api/public/operations/";

/// The JSON Schema of every failure body (contract §1).
pub fn error_body_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "enum": ProblemCode::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>()
                    },
                    "message": { "type": "string", "minLength": 1 },
                    "details": {
                        "type": "object",
                        "description": "`issues` (a list of `{path, message}`) when the input breaks the schema; otherwise `reason` and facts about the problem."
                    }
                },
                "required": ["code", "message"],
                "additionalProperties": false
            },
            "meta": {
                "type": "object",
                "properties": { "requestId": { "type": "string", "minLength": 1 } },
                "required": ["requestId"],
                "additionalProperties": false
            }
        },
        "required": ["error", "meta"],
        "additionalProperties": false
    })
}

fn without_dialect(schema: &Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    schema.remove("$schema");
    Value::Object(schema)
}

fn operation_object(op: &Operation) -> Value {
    let request_id_header = json!({ "X-Request-Id": { "$ref": "#/components/headers/X-Request-Id" } });
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "Success.",
            "headers": request_id_header,
            "content": { "application/json": { "schema": without_dialect(op.output_schema()) } }
        }),
    );
    let mut by_status: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for code in op.possible_problems() {
        by_status.entry(code.http_status()).or_default().push(code.as_str());
    }
    // Refusals of the request itself: a method other than POST, a body too slow
    // or too large, a dependency down or contention (with `Retry-After`).
    for (status, code) in [(405, "invalid_request"), (408, "invalid_request"), (413, "invalid_request")] {
        by_status.entry(status).or_default().push(code);
    }
    by_status.entry(503).or_default().push("internal_error");
    for (status, codes) in by_status {
        responses.insert(
            status.to_string(),
            json!({
                "description": format!("Problem: {}.", codes.join(", ")),
                "headers": request_id_header,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
            }),
        );
    }
    let mut parameters = Vec::new();
    if op.workspace != WorkspaceRequirement::None {
        parameters.push(json!({ "$ref": "#/components/parameters/Svc-Workspace" }));
    }
    json!({
        "operationId": op.id,
        "summary": op.summary,
        "tags": [op.id.split('.').next().unwrap_or(op.id)],
        "parameters": parameters,
        "requestBody": {
            "required": has_required_fields(op),
            "content": { "application/json": { "schema": without_dialect(op.input_schema()) } }
        },
        "responses": responses,
        "x-svc-cli-command": op.cli_command,
        "x-svc-mcp-tool": op.tool_name(),
        "x-svc-auth": op.auth.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
        "x-svc-workspace": op.workspace.as_str(),
        "x-svc-mutating": op.mutating,
        "x-svc-scope": op.scope.map(|s| s.as_str()),
    })
}

/// Whether the input has required fields: an empty body (`{}`) serves only
/// operations without any.
fn has_required_fields(op: &Operation) -> bool {
    op.input_schema().get("required").and_then(Value::as_array).is_some_and(|r| !r.is_empty())
}

/// The OpenAPI document of every operation in the catalog.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in &CATALOG {
        paths.insert(format!("{OPERATIONS_PREFIX}{}", op.path), json!({ "post": operation_object(op) }));
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": crate::schema::DIALECT,
        "info": {
            "title": "svc tenant operations",
            "version": CONTRACT_VERSION,
            "description": "One POST per operation. Every response carries X-Request-Id; every mutating operation accepts idempotencyKey.",
            "x-svc-catalog-digest": catalog::catalog_digest()
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A User session (an OAuth access token from the configured issuer) or a Workspace API key (`svck_...`)."
                }
            },
            "parameters": {
                "Svc-Workspace": {
                    "name": "Svc-Workspace",
                    "in": "header",
                    "required": false,
                    "description": "Workspace id or slug. An API key always acts on its own Workspace.",
                    "schema": { "type": "string", "minLength": 1, "pattern": crate::schema::NO_NUL_PATTERN }
                }
            },
            "headers": {
                "X-Request-Id": {
                    "description": "Equals meta.requestId.",
                    "schema": { "type": "string" }
                }
            },
            "schemas": { "Error": error_body_schema() }
        }
    })
}
