//! `GET /account`: the sign-in page, or for a User who has finished setup the
//! next steps (base URL, CLI sign-in, MCP configuration, the first call) and
//! their Workspaces.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use svc_contract::{OperationId, ProblemCode};

use super::web::{Form, Html, INVITE_COOKIE, cookie, escape, page, render, see_other};
use super::{PATH, call, failure, of, require_form, signed_in};
use crate::app::AppState;

pub async fn show(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let signed = match signed_in(&state, &headers).await {
        Ok(Some(signed)) => signed,
        Ok(None) => return super::sign_in_page(&state, "Sign in"),
        Err(response) => return response,
    };
    let list = call(&state, &signed, None, OperationId::WorkspaceList, json!({ "pageSize": 100 })).await;
    let list = match list {
        Ok(reply) => reply.data,
        Err(problem) if problem.code == ProblemCode::SetupRequired => return see_other(&format!("{PATH}/setup")),
        Err(problem) => return failure(problem),
    };
    if cookie(&headers, INVITE_COOKIE).is_some() {
        return see_other(&format!("{PATH}/join/confirm"));
    }
    let account = of(&state);
    let base = &account.base_url;
    let workspaces = workspace_items(&list);
    let mcp = serde_json::to_string_pretty(&json!({
        "mcpServers": { "svc": {
            "type": "http",
            "url": format!("{base}/api/mcp"),
            "headers": { "Authorization": "Bearer svck_... (an API key of the Workspace)" }
        } }
    }))
    .unwrap_or_default();
    let first_call = format!(
        "curl -s \"{base}/api/public/operations/identity/status\" \\\n  -H \"Authorization: Bearer $SVC_API_KEY\" -d '{{}}'"
    );
    let main = render(
        include_str!("templates/home.html"),
        &[
            ("base", base),
            ("login", &account.cli_hint),
            ("mcp", &mcp),
            ("first_call", &first_call),
            ("csrf", &signed.csrf),
        ],
        &[("workspaces", &workspaces)],
    );
    page(StatusCode::OK, "Next steps", main, Some((signed.who(), &signed.csrf)))
}

fn workspace_items(list: &Value) -> Html {
    let items: Vec<String> = list["workspaces"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|ws| {
            let text = |key: &str| escape(ws[key].as_str().unwrap_or_default());
            format!(
                "<li><a href=\"{PATH}/workspaces/{id}\">{name}</a> <span class=\"muted\">({slug}, {role})</span></li>",
                id = text("id"),
                name = text("name"),
                slug = text("slug"),
                role = text("role"),
            )
        })
        .collect();
    if items.is_empty() {
        Html("<p>You are not a member of any Workspace yet.</p>".into())
    } else {
        Html(format!("<ul>{}</ul>", items.join("")))
    }
}

/// `POST /account/workspaces`: another Workspace, with workspace.create.
pub async fn create_workspace(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let name = form.get("name").unwrap_or_default().trim();
    match call(&state, &signed, None, OperationId::WorkspaceCreate, json!({ "name": name })).await {
        Ok(reply) => {
            let id = reply.data["workspace"]["id"].as_str().unwrap_or_default();
            see_other(&format!("{PATH}/workspaces/{id}"))
        }
        Err(problem) => failure(problem),
    }
}
