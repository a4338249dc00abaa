//! A Workspace's page: its API keys (list, create with a preset or scopes,
//! rotate, revoke: the catalog's api_key operations, called as the User, so
//! only an owner or admin may) and its members.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use svc_contract::{OperationId, ProblemCode, Role, Scope};

use super::web::{Form, Html, escape, page, render, see_other};
use super::{PATH, Signed, call, caller, failure, require_form, require_session};
use crate::app::AppState;

/// `GET /account/workspaces/{workspace}`.
pub async fn show(State(state): State<AppState>, Path(workspace): Path<String>, headers: HeaderMap) -> Response {
    let signed = match require_session(&state, &headers).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let ws = match caller(&state, &signed, Some(&workspace)).await.and_then(|c| c.selection.required().cloned()) {
        Ok(ws) => ws,
        Err(problem) => return failure(problem),
    };
    let keys = match call(&state, &signed, Some(&workspace), OperationId::ApiKeyList, json!({ "pageSize": 100 })).await
    {
        Ok(reply) => key_rows(&ws.id.to_string(), &signed, &reply.data),
        Err(problem) if problem.code == ProblemCode::PermissionDenied => {
            Html("<p>Only an owner or admin of this Workspace manages its API keys.</p>".into())
        }
        Err(problem) => return failure(problem),
    };
    let members = match super::members::section(&state, &signed, &ws).await {
        Ok(html) => html,
        Err(problem) => return failure(problem),
    };
    // Only the forms the caller's role may use: keys are an owner's or admin's.
    let key_form = if ws.role.is_some_and(|r| r >= Role::Admin) {
        let scopes: String = Scope::ALL
            .iter()
            .map(|s| {
                let s = s.as_str();
                format!(
                    "<li><label><input type=\"checkbox\" name=\"scopes\" value=\"{s}\"> <code>{s}</code></label></li>"
                )
            })
            .collect();
        render(
            include_str!("templates/key_form.html"),
            &[("id", &ws.id.to_string()), ("csrf", &signed.csrf)],
            &[("scopes", &Html(scopes))],
        )
    } else {
        Html(String::new())
    };
    let main = render(
        include_str!("templates/workspace.html"),
        &[
            ("name", &ws.name),
            ("slug", &ws.slug),
            ("id", &ws.id.to_string()),
            ("role", ws.role.map_or("member", |r| r.as_str())),
        ],
        &[("keys", &keys), ("key_form", &key_form), ("members", &members)],
    );
    page(StatusCode::OK, &format!("Workspace {}", ws.name), main, Some((signed.who(), &signed.csrf)))
}

fn key_rows(workspace: &str, signed: &Signed, data: &Value) -> Html {
    let keys = data["apiKeys"].as_array().map(Vec::as_slice).unwrap_or_default();
    if keys.is_empty() {
        return Html("<p>No API keys yet.</p>".into());
    }
    let rows: String = keys
        .iter()
        .map(|key| {
            let text = |k: &str| escape(key[k].as_str().unwrap_or_default());
            let scopes: Vec<&str> = key["scopes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let access = match key["preset"].as_str() {
                Some(preset) => escape(preset),
                None => escape(&scopes.join(", ")),
            };
            let actions = if key["revokedAt"].is_null() {
                let action = |what: &str, label: &str| {
                    format!(
                        "<form method=\"post\" action=\"{PATH}/workspaces/{ws}/keys/{what}\" class=\"inline\">\
                         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                         <input type=\"hidden\" name=\"apiKeyId\" value=\"{id}\">\
                         <button type=\"submit\" aria-label=\"{label} {name}\">{label}</button></form>",
                        ws = escape(workspace),
                        csrf = escape(&signed.csrf),
                        id = text("id"),
                        name = text("name"),
                    )
                };
                format!("{}{}", action("rotate", "Rotate"), action("revoke", "Revoke"))
            } else {
                "revoked".to_owned()
            };
            format!(
                "<tr><td>{name}</td><td><code>{prefix}</code></td><td>{access}</td><td>{actions}</td></tr>",
                name = text("name"),
                prefix = text("keyPrefix"),
            )
        })
        .collect();
    Html(format!(
        "<table><caption>API keys</caption><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Prefix</th>\
         <th scope=\"col\">Access</th><th scope=\"col\">Actions</th></tr></thead><tbody>{rows}</tbody></table>"
    ))
}

/// The page that shows a new secret, once.
fn secret_page(signed: &Signed, workspace: &str, data: &Value) -> Response {
    let key = &data["apiKey"];
    let main = render(
        include_str!("templates/secret.html"),
        &[
            ("name", key["name"].as_str().unwrap_or_default()),
            ("secret", data["secret"].as_str().unwrap_or_default()),
            ("workspace", workspace),
        ],
        &[],
    );
    page(StatusCode::OK, "Your new API key", main, Some((signed.who(), &signed.csrf)))
}

/// `POST .../keys`: api_key.create with a preset, or the scopes ticked.
pub async fn create(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let mut input = json!({ "name": form.get("name").unwrap_or_default().trim() });
    match form.get("preset") {
        Some("custom") => input["scopes"] = json!(form.all("scopes")),
        Some(preset) => input["preset"] = preset.into(),
        None => {}
    }
    match call(&state, &signed, Some(&workspace), OperationId::ApiKeyCreate, input).await {
        Ok(reply) => secret_page(&signed, &workspace, &reply.data),
        Err(problem) => failure(problem),
    }
}

/// `POST .../keys/rotate`: api_key.rotate; the new secret is shown once.
pub async fn rotate(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let input = json!({ "apiKeyId": form.get("apiKeyId").unwrap_or_default() });
    match call(&state, &signed, Some(&workspace), OperationId::ApiKeyRotate, input).await {
        Ok(reply) => secret_page(&signed, &workspace, &reply.data),
        Err(problem) => failure(problem),
    }
}

/// `POST .../keys/revoke`: api_key.revoke (the button is the confirmation).
pub async fn revoke(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let input = json!({ "apiKeyId": form.get("apiKeyId").unwrap_or_default(), "confirm": true });
    match call(&state, &signed, Some(&workspace), OperationId::ApiKeyRevoke, input).await {
        Ok(_) => see_other(&format!(
            "{PATH}/workspaces/{}",
            url::form_urlencoded::byte_serialize(workspace.as_bytes()).collect::<String>()
        )),
        Err(problem) => failure(problem),
    }
}
