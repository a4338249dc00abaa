//! A Workspace's members: the list, invites by single-use expiring link, role
//! changes and removal (owners and admins), each the application's operation
//! (`member.*`, `invite.list`) called through the call path.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use svc_contract::operations::member::{InviteOutput, InvitesOutput, ListOutput};
use svc_contract::{OperationId, Problem, Role};
use svc_core::caller::WorkspaceContext;

use super::web::{Form, Html, escape, form_key, page, render, see_other};
use super::{PATH, Signed, call, caller, failure, of, require_form};
use crate::app::AppState;

const ROLES: [Role; 3] = [Role::Member, Role::Admin, Role::Owner];

fn role_options(selected: Role) -> String {
    ROLES
        .iter()
        .map(|r| {
            let chosen = if *r == selected { " selected" } else { "" };
            format!("<option value=\"{0}\"{chosen}>{0}</option>", r.as_str())
        })
        .collect()
}

/// The data of an operation's reply, as its output type.
fn data<T: DeserializeOwned>(data: Value) -> Result<T, Problem> {
    serde_json::from_value(data).map_err(|_| Problem::internal())
}

/// The members part of a Workspace's page.
pub async fn section(state: &AppState, signed: &Signed, ws: &WorkspaceContext) -> Result<Html, Problem> {
    let id = ws.id.to_string();
    let listed = call(state, signed, Some(&id), OperationId::MemberList, json!({})).await?;
    let members = data::<ListOutput>(listed.data)?.members;
    let manager = ws.role.is_some_and(|r| r >= Role::Admin);
    let (id, csrf) = (escape(&id), escape(&signed.csrf));
    let rows: String = members
        .iter()
        .map(|m| {
            let name = escape(m.name.as_deref().unwrap_or(&m.email));
            let user = escape(&m.user_id);
            let actions = if manager {
                format!(
                    "<form method=\"post\" action=\"{PATH}/workspaces/{id}/members/role\" class=\"inline\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"userId\" value=\"{user}\">\
                     <input type=\"hidden\" name=\"idempotencyKey\" value=\"{role_key}\">\
                     <label>Role of {name} <select name=\"role\">{options}</select></label> <button type=\"submit\">Change role</button></form>\
                     <form method=\"post\" action=\"{PATH}/workspaces/{id}/members/remove\" class=\"inline\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"userId\" value=\"{user}\">\
                     <input type=\"hidden\" name=\"idempotencyKey\" value=\"{remove_key}\">\
                     <button type=\"submit\" aria-label=\"Remove {name}\">Remove</button></form>",
                    options = role_options(m.role),
                    role_key = escape(&form_key()),
                    remove_key = escape(&form_key()),
                )
            } else {
                String::new()
            };
            format!(
                "<tr><td>{name}</td><td>{email}</td><td>{role}</td><td>{actions}</td></tr>",
                email = escape(&m.email),
                role = m.role.as_str()
            )
        })
        .collect();
    let invites = if manager {
        let listed = call(state, signed, Some(&ws.id.to_string()), OperationId::InviteList, json!({})).await?;
        let open: String = data::<InvitesOutput>(listed.data)?
            .invites
            .iter()
            .map(|i| {
                format!("<li>{} invite, open until {}</li>", i.role.as_str(), svc_core::timestamp::day(i.expires_at))
            })
            .collect();
        let open = if open.is_empty() { String::new() } else { format!("<h3>Open invites</h3><ul>{open}</ul>") };
        render(
            include_str!("templates/invite_form.html"),
            &[("id", &ws.id.to_string()), ("csrf", &signed.csrf)],
            &[("open", &Html(open))],
        )
    } else {
        Html(String::new())
    };
    Ok(Html(format!(
        "<table><caption>Members</caption><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">E-mail</th>\
         <th scope=\"col\">Role</th><th scope=\"col\">Actions</th></tr></thead><tbody>{rows}</tbody></table>{}",
        invites.0
    )))
}

/// The signed-in form's session and the Workspace it names, with the
/// caller's role in it.
async fn workspace_form(
    state: &AppState,
    workspace: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Signed, WorkspaceContext, Form), Response> {
    let form = Form::parse(body);
    let signed = require_form(state, headers, &form).await?;
    let caller = caller(state, &signed, Some(workspace)).await.map_err(failure)?;
    let ws = caller.selection.required().cloned().map_err(failure)?;
    Ok((signed, ws, form))
}

fn role_field(form: &Form) -> Result<Role, Problem> {
    form.get("role")
        .and_then(Role::parse)
        .ok_or_else(|| Problem::invalid("role", "Choose a role: owner, admin or member."))
}

fn user_field(form: &Form) -> Result<&str, Problem> {
    form.get("userId").filter(|id| !id.is_empty()).ok_or_else(|| Problem::not_found("member"))
}

/// `input` with the form's idempotency key, when it carries one.
fn keyed(mut input: Value, form: &Form) -> Value {
    if let (Some(key), Some(object)) = (form.get("idempotencyKey").filter(|k| !k.is_empty()), input.as_object_mut()) {
        object.insert("idempotencyKey".into(), key.into());
    }
    input
}

fn back(ws: &WorkspaceContext) -> Response {
    see_other(&format!("{PATH}/workspaces/{}", ws.id))
}

/// `POST .../invites`: a single-use link that expires, shown to copy. The
/// code travels in the link's fragment, which browsers never send to a
/// server, so it reaches no request line and no log. The form carries no
/// idempotency key: a replay could not show the link again (its code is not
/// kept), so a second post makes a second invite.
pub async fn invite(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (signed, ws, form) = match workspace_form(&state, &workspace, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let role = match role_field(&form) {
        Ok(role) => role,
        Err(problem) => return failure(problem),
    };
    let made = call(&state, &signed, Some(&workspace), OperationId::MemberInvite, json!({ "role": role }))
        .await
        .and_then(|reply| data::<InviteOutput>(reply.data));
    let (token, expires_at) = match made {
        Ok(InviteOutput { token: Some(token), invite }) => (token, invite.expires_at),
        Ok(InviteOutput { token: None, .. }) => return failure(Problem::internal()),
        Err(problem) => return failure(problem),
    };
    let link = format!("{}/join#{token}", of(&state).url());
    let main = render(
        include_str!("templates/invite_link.html"),
        &[
            ("link", &link),
            ("workspace", &ws.name),
            ("role", role.as_str()),
            ("expires", &svc_core::timestamp::day(expires_at)),
            ("id", &ws.id.to_string()),
        ],
        &[],
    );
    page(StatusCode::OK, "Invite link", main, Some((signed.who(), &signed.csrf)))
}

/// `POST .../members/role`.
pub async fn change_role(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (signed, ws, form) = match workspace_form(&state, &workspace, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let input = match (role_field(&form), user_field(&form)) {
        (Ok(role), Ok(user)) => keyed(json!({ "userId": user, "role": role }), &form),
        (Err(problem), _) | (_, Err(problem)) => return failure(problem),
    };
    match call(&state, &signed, Some(&workspace), OperationId::MemberSetRole, input).await {
        Ok(_) => back(&ws),
        Err(problem) => failure(problem),
    }
}

/// `POST .../members/remove`.
pub async fn remove(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (signed, ws, form) = match workspace_form(&state, &workspace, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let input = match user_field(&form) {
        Ok(user) => keyed(json!({ "userId": user }), &form),
        Err(problem) => return failure(problem),
    };
    match call(&state, &signed, Some(&workspace), OperationId::MemberRemove, input).await {
        Ok(_) => back(&ws),
        Err(problem) => failure(problem),
    }
}
