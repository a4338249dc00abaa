//! Accepting an invite: the link's code (from its fragment, or typed in) is
//! kept in a cookie through sign-in and setup, then the User confirms and
//! joins with the invite's role.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::json;
use svc_contract::operations::member::AcceptOutput;
use svc_contract::{OperationId, Problem, Role};
use svc_core::auth::relying_party::random_token;

use super::web::{self, FORM_COOKIE, Form, INVITE_COOKIE, cookie, error_page, page, render, see_other, set_cookie};
use super::{PATH, call, caller, failure, of, require_form, signed_in};
use crate::app::AppState;

/// How long an invite code waits in its cookie for sign-in and setup.
const INVITE_COOKIE_SECS: i64 = 3600;

/// `GET /account/join`: the form the link's page fills in. Before sign-in
/// there is no session to bind a CSRF token to, so the form carries a random
/// value that must equal its cookie's (double submit).
pub async fn show(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let account = of(&state);
    let existing = cookie(&headers, FORM_COOKIE).map(str::to_owned);
    let token = match existing.clone().map_or_else(random_token, Ok) {
        Ok(token) => token,
        Err(_) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, "No randomness is available; try again.", PATH),
    };
    let main = render(include_str!("templates/join.html"), &[("csrf", &token)], &[]);
    let mut response = page(StatusCode::OK, "Join a Workspace", main, None);
    if existing.is_none() {
        response
            .headers_mut()
            .append(header::SET_COOKIE, set_cookie(FORM_COOKIE, &token, 3600, account.secure_cookies));
    }
    response
}

/// `POST /account/join`: keeps the code for after sign-in.
pub async fn start(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let expected = cookie(&headers, FORM_COOKIE).unwrap_or_default();
    if expected.is_empty() || !web::same(form.get("csrf"), expected) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This form has expired or did not come from this site. Open the invite link again.",
            PATH,
        );
    }
    let code = form.get("code").unwrap_or_default().trim();
    let valid = !code.is_empty()
        && code.len() <= 100
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return error_page(StatusCode::BAD_REQUEST, "That is not an invite code. Open the invite link again.", PATH);
    }
    let mut response = see_other(&format!("{PATH}/join/confirm"));
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(INVITE_COOKIE, code, INVITE_COOKIE_SECS, of(&state).secure_cookies));
    response
}

fn forget_invite(state: &AppState, mut response: Response) -> Response {
    response.headers_mut().append(header::SET_COOKIE, set_cookie(INVITE_COOKIE, "", 0, of(state).secure_cookies));
    response
}

/// `GET /account/join/confirm`: sign in, finish setup, then confirm.
pub async fn confirm(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(code) = cookie(&headers, INVITE_COOKIE) else { return see_other(PATH) };
    let signed = match signed_in(&state, &headers).await {
        Ok(Some(signed)) => signed,
        Ok(None) => return super::sign_in_page(&state, "Sign in to join"),
        Err(response) => return response,
    };
    if let Err(problem) = caller(&state, &signed, None).await {
        return failure(problem);
    }
    let invite = match svc_core::account::open_invite(state.service.pool(), code).await {
        Ok(Some(invite)) => invite,
        Ok(None) => {
            let refused = error_page(
                StatusCode::GONE,
                "This invite link was used already, has expired, or does not exist. Ask for a new one.",
                PATH,
            );
            return forget_invite(&state, refused);
        }
        Err(error) => return failure(error.into_problem()),
    };
    let main = render(
        include_str!("templates/join_confirm.html"),
        &[
            ("workspace", &invite.workspace_name),
            ("role", Role::from(invite.role).as_str()),
            ("csrf", &signed.csrf),
            ("key", &web::form_key()),
        ],
        &[],
    );
    page(StatusCode::OK, "Join a Workspace", main, Some((signed.who(), &signed.csrf)))
}

/// `POST /account/join/accept`: spends the invite and joins (invite.accept,
/// through the call path; a repeated post answers as the first).
pub async fn accept(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let signed = match require_form(&state, &headers, &form).await {
        Ok(signed) => signed,
        Err(response) => return response,
    };
    let Some(code) = cookie(&headers, INVITE_COOKIE) else { return see_other(PATH) };
    let mut input = json!({ "token": code });
    if let Some(key) = form.get("idempotencyKey").filter(|k| !k.is_empty()) {
        input["idempotencyKey"] = key.into();
    }
    let joined = call(&state, &signed, None, OperationId::InviteAccept, input).await;
    let joined =
        joined.and_then(|reply| serde_json::from_value::<AcceptOutput>(reply.data).map_err(|_| Problem::internal()));
    match joined {
        Ok(joined) => forget_invite(&state, see_other(&format!("{PATH}/workspaces/{}", joined.workspace_id))),
        Err(problem) => forget_invite(&state, failure(problem)),
    }
}
