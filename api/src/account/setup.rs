//! First-time setup: the User's name (what the `users` row needs besides the
//! identity and e-mail the provider gave; the e-mail too where it gave none),
//! then the first Workspace, its slug shown before it is created. An invited
//! User skips the Workspace: they join.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;
use sha2::{Digest, Sha256};
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
    form_page(&signed, &Fields { name: &name, email: "", workspace: "" }, invited(&headers), None)
}

/// What the setup form holds.
struct Fields<'a> {
    name: &'a str,
    /// Typed by the person: used only when the provider gave no e-mail.
    email: &'a str,
    workspace: &'a str,
}

impl<'a> Fields<'a> {
    fn of(form: &'a Form) -> Self {
        let field = |name| form.get(name).unwrap_or_default().trim();
        Self { name: field("name"), email: field("email"), workspace: field("workspace") }
    }
}

/// The e-mail address setup records: the provider's, else the one typed.
fn email<'a>(signed: &'a Signed, fields: &Fields<'a>) -> &'a str {
    if signed.session.email.is_empty() { fields.email } else { &signed.session.email }
}

fn invited(headers: &HeaderMap) -> bool {
    cookie(headers, INVITE_COOKIE).is_some()
}

fn form_page(signed: &Signed, fields: &Fields<'_>, invited: bool, error: Option<&str>) -> Response {
    let workspace_html = if invited {
        Html(String::new())
    } else {
        render(include_str!("templates/setup_workspace.html"), &[("workspace", fields.workspace)], &[])
    };
    let email_html = if signed.session.email.is_empty() {
        render(include_str!("templates/setup_email.html"), &[("email", fields.email)], &[])
    } else {
        render(include_str!("templates/setup_email_known.html"), &[("email", &signed.session.email)], &[])
    };
    let error_html = error_html(error);
    let main = render(
        include_str!("templates/setup.html"),
        &[("csrf", &signed.csrf), ("name", fields.name)],
        &[("email_field", &email_html), ("workspace_fields", &workspace_html), ("error", &error_html)],
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
    let fields = Fields::of(&form);
    let invited = invited(&headers);
    if !valid_name(fields.name) {
        return form_page(&signed, &fields, invited, Some("Give your name (1 to 120 characters)."));
    }
    let email = email(&signed, &fields);
    if !svc_contract::validate::is_email(email) {
        return form_page(&signed, &fields, invited, Some("Give your e-mail address."));
    }
    if invited {
        return match svc_core::account::finish_setup(state.service.pool(), &signed.session, fields.name, email).await {
            Ok(()) => see_other(&format!("{PATH}/join/confirm")),
            Err(error) => failure(error.into_problem()),
        };
    }
    if !valid_name(fields.workspace) {
        return form_page(&signed, &fields, invited, Some("Name your Workspace (1 to 120 characters)."));
    }
    let slug = match svc_core::account::preview_slug(state.service.pool(), fields.workspace).await {
        Ok(slug) => slug,
        Err(error) => return failure(error.into_problem()),
    };
    let main = render(
        include_str!("templates/setup_confirm.html"),
        &[
            ("csrf", &signed.csrf),
            ("name", fields.name),
            ("email", email),
            ("workspace", fields.workspace),
            ("slug", &slug),
            ("base", &super::of(&state).base_url),
        ],
        &[],
    );
    page(StatusCode::OK, "Check your Workspace", main, Some((signed.who(), &signed.csrf)))
}

/// `POST /account/setup/confirm`: sets the User up (exactly `svc-api admin
/// user-setup`) and creates the Workspace with workspace.create, as the User.
/// Posting it again (a double click, a reload) answers what the first post
/// did: the creation carries an idempotency key made of the User and the form.
pub async fn confirm(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let fields = Fields::of(&form);
    let slug = form.get("slug").filter(|s| !s.is_empty());
    if !valid_name(fields.name) || !valid_name(fields.workspace) {
        return error_page(StatusCode::BAD_REQUEST, "The form is incomplete; start again.", &format!("{PATH}/setup"));
    }
    let email = email(&signed, &fields);
    if let Err(error) = svc_core::account::finish_setup(state.service.pool(), &signed.session, fields.name, email).await
    {
        return failure(error.into_problem());
    }
    let mut input = json!({
        "name": fields.workspace,
        "idempotencyKey": setup_key(&signed, fields.workspace, slug.unwrap_or_default()),
    });
    if let Some(slug) = slug {
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

/// The idempotency key of a setup's Workspace creation: the same User
/// confirming the same Workspace name and slug again gets the first answer.
fn setup_key(signed: &Signed, workspace: &str, slug: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [&signed.session.issuer, &signed.session.subject, workspace, slug] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("account-setup-{hex}")
}
