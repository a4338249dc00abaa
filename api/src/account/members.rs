//! A Workspace's members: the list, invites by single-use expiring link, role
//! changes and removal (owners and admins; the rules are
//! `svc_core::account`'s).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use svc_contract::{Problem, Role};
use svc_core::caller::WorkspaceContext;
use svc_core::ids::UserId;

use super::web::{Form, Html, escape, page, render, see_other};
use super::{PATH, Signed, caller, failure, of, require_form};
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

/// The members part of a Workspace's page.
pub async fn section(state: &AppState, signed: &Signed, ws: &WorkspaceContext) -> Result<Html, Problem> {
    let pool = state.service.pool();
    let members = svc_core::account::members(pool, ws).await.map_err(|e| e.into_problem())?;
    let manager = ws.role.is_some_and(|r| r >= Role::Admin);
    let id = escape(&ws.id.to_string());
    let csrf = escape(&signed.csrf);
    let rows: String = members
        .iter()
        .map(|m| {
            let role = Role::from(m.role);
            let name = escape(m.name.as_deref().unwrap_or(&m.email));
            let user = escape(&m.user_id.to_string());
            let actions = if manager {
                format!(
                    "<form method=\"post\" action=\"{PATH}/workspaces/{id}/members/role\" class=\"inline\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"userId\" value=\"{user}\">\
                     <label>Role of {name} <select name=\"role\">{options}</select></label> <button type=\"submit\">Change role</button></form>\
                     <form method=\"post\" action=\"{PATH}/workspaces/{id}/members/remove\" class=\"inline\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"userId\" value=\"{user}\">\
                     <button type=\"submit\" aria-label=\"Remove {name}\">Remove</button></form>",
                    options = role_options(role),
                )
            } else {
                String::new()
            };
            format!(
                "<tr><td>{name}</td><td>{email}</td><td>{role}</td><td>{actions}</td></tr>",
                email = escape(&m.email),
                role = role.as_str()
            )
        })
        .collect();
    let invites = if manager {
        let open = svc_core::account::open_invites(pool, ws).await.map_err(|e| e.into_problem())?;
        let open: String = open
            .iter()
            .map(|i| {
                let expires = i.expires_at.date();
                format!("<li>{} invite, open until {expires}</li>", Role::from(i.role).as_str())
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
    workspace_form_by(state, workspace, headers, body).await.map(|(signed, ws, form, _)| (signed, ws, form))
}

/// [`workspace_form`], with the acting User.
async fn workspace_form_by(
    state: &AppState,
    workspace: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Signed, WorkspaceContext, Form, UserId), Response> {
    let form = Form::parse(body);
    let signed = require_form(state, headers, &form).await?;
    let caller = caller(state, &signed, Some(workspace)).await.map_err(failure)?;
    let ws = caller.selection.required().cloned().map_err(failure)?;
    let svc_core::caller::Principal::User(user) = &caller.principal else {
        return Err(failure(Problem::internal()));
    };
    Ok((signed, ws, form, user.id))
}

fn role_field(form: &Form) -> Result<Role, Problem> {
    form.get("role")
        .and_then(Role::parse)
        .ok_or_else(|| Problem::invalid("role", "Choose a role: owner, admin or member."))
}

fn user_field(form: &Form) -> Result<UserId, Problem> {
    form.get("userId").and_then(UserId::parse).ok_or_else(|| Problem::not_found("member"))
}

fn back(ws: &WorkspaceContext) -> Response {
    see_other(&format!("{PATH}/workspaces/{}", ws.id))
}

/// `POST .../invites`: a single-use link that expires, shown to copy. The
/// code travels in the link's fragment, which browsers never send to a
/// server, so it reaches no request line and no log.
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
    let user = match caller(&state, &signed, Some(&workspace)).await {
        Ok(svc_core::Caller { principal: svc_core::caller::Principal::User(user), .. }) => user.id,
        Ok(_) => return failure(Problem::permission_denied("Only a User invites.")),
        Err(problem) => return failure(problem),
    };
    match svc_core::account::invite(state.service.pool(), user, &ws, role).await {
        Ok(created) => {
            let link = format!("{}/join#{}", of(&state).url(), created.token);
            let main = render(
                include_str!("templates/invite_link.html"),
                &[
                    ("link", &link),
                    ("workspace", &ws.name),
                    ("role", role.as_str()),
                    ("expires", &created.expires_at.date().to_string()),
                    ("id", &ws.id.to_string()),
                ],
                &[],
            );
            page(StatusCode::OK, "Invite link", main, Some((signed.who(), &signed.csrf)))
        }
        Err(error) => failure(error.into_problem()),
    }
}

/// `POST .../members/role`.
pub async fn change_role(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, ws, form, actor) = match workspace_form_by(&state, &workspace, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (role, user) = match (role_field(&form), user_field(&form)) {
        (Ok(role), Ok(user)) => (role, user),
        (Err(problem), _) | (_, Err(problem)) => return failure(problem),
    };
    match svc_core::account::change_role(state.service.pool(), &ws, actor, user, role).await {
        Ok(()) => {
            state.service.forget_callers();
            back(&ws)
        }
        Err(error) => failure(error.into_problem()),
    }
}

/// `POST .../members/remove`.
pub async fn remove(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, ws, form, actor) = match workspace_form_by(&state, &workspace, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let user = match user_field(&form) {
        Ok(user) => user,
        Err(problem) => return failure(problem),
    };
    match svc_core::account::remove_member(state.service.pool(), &ws, actor, user).await {
        Ok(()) => {
            state.service.forget_callers();
            back(&ws)
        }
        Err(error) => failure(error.into_problem()),
    }
}
