//! First-time setup: the User's name (what the `users` row needs besides the
//! identity and e-mail the ID token gave), then the first Workspace, its slug
//! shown before it is created. An invited User skips the Workspace: they join.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;
use svc_contract::OperationId;

use super::web::{Form, Html, INVITE_COOKIE, cookie, error_page, page, render, see_other};
use super::{PATH, Signed, call, caller, failure, require_form, require_session};
use crate::app::AppState;

/// `GET /account/setup`.
pub async fn show(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let signed = match require_session(&state, &headers).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    if caller(&state, &signed, None).await.is_ok() {
        return see_other(PATH);
    }
    let name = signed.session.name.clone().unwrap_or_default();
    form_page(&signed, &name, "", invited(&headers), None)
}

fn invited(headers: &HeaderMap) -> bool {
    cookie(headers, INVITE_COOKIE).is_some()
}

fn form_page(signed: &Signed, name: &str, workspace: &str, invited: bool, error: Option<&str>) -> Response {
    let workspace_html = if invited {
        Html(String::new())
    } else {
        render(include_str!("templates/setup_workspace.html"), &[("workspace", workspace)], &[])
    };
    let error_html = error_html(error);
    let main = render(
        include_str!("templates/setup.html"),
        &[("csrf", &signed.csrf), ("name", name), ("email", &signed.session.email)],
        &[("workspace_fields", &workspace_html), ("error", &error_html)],
    );
    let status = if error.is_some() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    page(status, "Finish signing up", main, Some((signed.who(), &signed.csrf)))
}

pub fn error_html(error: Option<&str>) -> Html {
    match error {
        Some(message) => render(include_str!("templates/alert.html"), &[("message", message)], &[]),
        None => Html(String::new()),
    }
}

fn valid_name(name: &str) -> bool {
    let len = name.trim().chars().count();
    (1..=120).contains(&len)
}

/// `POST /account/setup`: checks the form and shows the Workspace's slug
/// before anything is created. An invited User is set up at once and goes on
/// to the invite.
pub async fn preview(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let name = form.get("name").unwrap_or_default().trim();
    let workspace = form.get("workspace").unwrap_or_default().trim();
    let invited = invited(&headers);
    if !valid_name(name) {
        return form_page(&signed, name, workspace, invited, Some("Give your name (1 to 120 characters)."));
    }
    if invited {
        return match svc_core::account::finish_setup(state.service.pool(), &signed.session, name).await {
            Ok(()) => see_other(&format!("{PATH}/join/confirm")),
            Err(error) => failure(error.into_problem()),
        };
    }
    if !valid_name(workspace) {
        return form_page(&signed, name, workspace, invited, Some("Name your Workspace (1 to 120 characters)."));
    }
    let slug = match svc_core::account::preview_slug(state.service.pool(), workspace).await {
        Ok(slug) => slug,
        Err(error) => return failure(error.into_problem()),
    };
    let main = render(
        include_str!("templates/setup_confirm.html"),
        &[
            ("csrf", &signed.csrf),
            ("name", name),
            ("workspace", workspace),
            ("slug", &slug),
            ("base", &super::of(&state).base_url),
        ],
        &[],
    );
    page(StatusCode::OK, "Check your Workspace", main, Some((signed.who(), &signed.csrf)))
}

/// `POST /account/setup/confirm`: sets the User up (exactly `svc-api admin
/// user-setup`) and creates the Workspace with workspace.create, as the User.
pub async fn confirm(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let (name, workspace, slug) =
        (form.get("name").unwrap_or_default(), form.get("workspace").unwrap_or_default(), form.get("slug"));
    if !valid_name(name) || !valid_name(workspace) {
        return error_page(StatusCode::BAD_REQUEST, "The form is incomplete; start again.", &format!("{PATH}/setup"));
    }
    if let Err(error) = svc_core::account::finish_setup(state.service.pool(), &signed.session, name).await {
        return failure(error.into_problem());
    }
    let mut input = json!({ "name": workspace.trim() });
    if let Some(slug) = slug.filter(|s| !s.is_empty()) {
        input["slug"] = slug.into();
    }
    match call(&state, &signed, None, OperationId::WorkspaceCreate, input).await {
        Ok(_) => see_other(PATH),
        Err(problem) => error_page(
            StatusCode::from_u16(problem.http_status()).unwrap_or(StatusCode::BAD_REQUEST),
            &problem.message,
            PATH,
        ),
    }
}
