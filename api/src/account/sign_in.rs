//! Sign-in (Authorization Code with S256 PKCE, `state` and `nonce`), its
//! callback, and sign-out.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use svc_core::auth::relying_party::{Challenge, random_token};
use svc_core::store::web_sessions::SignInRow;

use super::web::{self, Form, SESSION_COOKIE, SIGN_IN_COOKIE, cookie, error_page, see_other, set_cookie};
use super::{PATH, of};
use crate::app::AppState;

/// `GET /account/sign-in`: records the sign-in under way and sends the browser
/// to the provider. The record is bound to this browser by a cookie, so a
/// callback started elsewhere (login CSRF) finds nothing.
pub async fn start(State(state): State<AppState>, uri: Uri) -> Response {
    let account = of(&state);
    let Some(relying_party) = &account.relying_party else {
        return error_page(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is not configured on this server.", PATH);
    };
    let (Ok(challenge), Ok(binding)) = (Challenge::new(), random_token()) else {
        return error_page(StatusCode::INTERNAL_SERVER_ERROR, "No randomness is available; try again.", PATH);
    };
    // With the development provider, `?as=new` signs in a new local User, and
    // `?as=new-without-email` one the provider knows no e-mail address of.
    let prefix = match uri.query() {
        Some("as=new") if account.dev => Some(crate::devidp::NEW_USER_PREFIX),
        Some("as=new-without-email") if account.dev => Some(crate::devidp::WITHOUT_EMAIL_PREFIX),
        _ => None,
    };
    let hint = prefix.map(|prefix| format!("{prefix}{}", &binding[..12].replace('-', "x")));
    let url = match relying_party.authorization_url(&challenge, hint.as_deref()).await {
        Ok(url) => url,
        Err(error) => {
            tracing::warn!(%error, "the identity provider cannot be reached");
            return error_page(
                StatusCode::BAD_GATEWAY,
                "The identity provider cannot be reached; try again soon.",
                PATH,
            );
        }
    };
    let row = SignInRow { state: challenge.state, verifier: challenge.verifier, nonce: challenge.nonce };
    if let Err(error) = svc_core::account::begin_sign_in(state.service.pool(), &binding, &row).await {
        return super::failure(error.into_problem());
    }
    let mut response = see_other(&url);
    let lifetime = svc_core::account::SIGN_IN_LIFETIME.whole_seconds();
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, &binding, lifetime, account.secure_cookies));
    response
}

/// `GET /account/callback`: checks `state` against this browser's sign-in,
/// exchanges the code (with the PKCE verifier) and checks the ID token
/// (signature, issuer, audience, expiry, `nonce`), then starts the session.
pub async fn callback(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let account = of(&state);
    let Some(relying_party) = &account.relying_party else {
        return error_page(StatusCode::SERVICE_UNAVAILABLE, "Sign-in is not configured on this server.", PATH);
    };
    let refused = |message: &str| error_page(StatusCode::BAD_REQUEST, message, PATH);
    let pending = match cookie(&headers, SIGN_IN_COOKIE) {
        Some(binding) => match svc_core::account::take_sign_in(state.service.pool(), binding).await {
            Ok(pending) => pending,
            Err(error) => return super::failure(error.into_problem()),
        },
        None => None,
    };
    let Some(pending) = pending else {
        return refused("This sign-in was not started in this browser, or took too long. Sign in again.");
    };
    let query = Form::parse(&Bytes::copy_from_slice(uri.query().unwrap_or_default().as_bytes()));
    if !web::same(query.get("state"), &pending.state) {
        return refused("The sign-in answer does not belong to this sign-in. Sign in again.");
    }
    if query.get("error").is_some() {
        return refused("The identity provider did not sign you in. Sign in again.");
    }
    let Some(code) = query.get("code") else { return refused("The sign-in answer has no code. Sign in again.") };
    let id_token = match relying_party.exchange(code, &pending.verifier, &pending.nonce).await {
        Ok(id_token) => id_token,
        Err(error) => {
            tracing::warn!(%error, "sign-in refused");
            return refused("The sign-in could not be completed. Sign in again.");
        }
    };
    let started = match svc_core::account::start_session(state.service.pool(), &id_token).await {
        Ok(started) => started,
        Err(error) => return super::failure(error.into_problem()),
    };
    let mut response = see_other(PATH);
    let lifetime = svc_core::account::SESSION_LIFETIME.whole_seconds();
    let set = response.headers_mut();
    set.append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, &started.token, lifetime, account.secure_cookies));
    set.append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, "", 0, account.secure_cookies));
    response
}

/// `POST /account/sign-out`: ends the session here (the provider's own
/// session is the provider's).
pub async fn sign_out(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    if let Err(refused) = super::require_form(&state, &headers, &form).await {
        return refused;
    }
    if let Some(token) = cookie(&headers, SESSION_COOKIE)
        && let Err(error) = svc_core::account::end_session(state.service.pool(), token).await
    {
        return super::failure(error.into_problem());
    }
    let mut response = see_other(PATH);
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, "", 0, of(&state).secure_cookies));
    response
}
