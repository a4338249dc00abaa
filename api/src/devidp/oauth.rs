//! The development issuer's OAuth endpoints: discovery, keys, `authorize`,
//! `token` and `revoke`. Grants live in memory: a restart (which also changes
//! the signing key) ends every session.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use url::Url;

use super::signer::{random_token, s256};
use super::{DevIdp, NEW_USER_PREFIX, SCOPES, SUBJECT, is_loopback};

const CODE_LIFETIME: Duration = Duration::from_secs(60);
const ACCESS_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
const REFRESH_TOKEN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// An authorization code waiting to be exchanged.
struct CodeGrant {
    subject: String,
    redirect_uri: String,
    challenge: String,
    scope: String,
    nonce: Option<String>,
    expires: Instant,
}

/// A refresh token's grant (the token is used once: each refresh rotates it).
struct RefreshGrant {
    subject: String,
    scope: String,
    expires: Instant,
}

#[derive(Default)]
pub struct Grants {
    codes: Mutex<HashMap<String, CodeGrant>>,
    refresh: Mutex<HashMap<String, RefreshGrant>>,
}

impl Grants {
    fn add_code(&self, code: String, grant: CodeGrant) {
        if let Ok(mut codes) = self.codes.lock() {
            let now = Instant::now();
            codes.retain(|_, g| g.expires > now);
            codes.insert(code, grant);
        }
    }

    /// The code's grant, which is spent by being asked for, whatever follows.
    fn take_code(&self, code: &str) -> Option<CodeGrant> {
        let grant = self.codes.lock().ok()?.remove(code)?;
        (grant.expires > Instant::now()).then_some(grant)
    }

    fn add_refresh(&self, token: String, subject: &str, scope: &str) {
        if let Ok(mut refresh) = self.refresh.lock() {
            let now = Instant::now();
            refresh.retain(|_, g| g.expires > now);
            refresh.insert(
                token,
                RefreshGrant {
                    subject: subject.to_owned(),
                    scope: scope.to_owned(),
                    expires: now + REFRESH_TOKEN_LIFETIME,
                },
            );
        }
    }

    fn take_refresh(&self, token: &str) -> Option<RefreshGrant> {
        let grant = self.refresh.lock().ok()?.remove(token)?;
        (grant.expires > Instant::now()).then_some(grant)
    }
}

pub async fn discovery(State(idp): State<Arc<DevIdp>>) -> Response {
    Json(idp.discovery()).into_response()
}

pub async fn jwks(State(idp): State<Arc<DevIdp>>) -> Response {
    Json(idp.signer.jwks().clone()).into_response()
}

/// Form or query parameters, each at most once (RFC 6749 §3.1, §3.2).
fn parameters(text: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut parameters = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(text) {
        match parameters.entry(name.into_owned()) {
            Entry::Occupied(entry) => return Err(format!("`{}` is given more than once", entry.key())),
            Entry::Vacant(entry) => entry.insert(value.into_owned()),
        };
    }
    Ok(parameters)
}

/// A refused sign-in request that cannot be sent back to the client: shown to
/// the person at the browser instead (RFC 6749 §4.1.2.1).
fn page(message: impl Into<String>) -> Response {
    let text = format!("The sign-in request was refused: {}\n", message.into());
    (StatusCode::BAD_REQUEST, [(header::CACHE_CONTROL, "no-store")], text).into_response()
}

fn redirect(mut to: Url, pairs: &[(&str, &str)]) -> Response {
    to.query_pairs_mut().extend_pairs(pairs);
    match HeaderValue::from_str(to.as_str()) {
        Ok(location) => (
            StatusCode::FOUND,
            [(header::LOCATION, location), (header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        )
            .into_response(),
        Err(_) => page("the redirect_uri cannot be sent back"),
    }
}

/// `redirect_uri` when it is a loopback address a native client listens on
/// (RFC 8252 §7.3): any port and path, no fragment.
fn loopback_redirect(text: &str) -> Option<Url> {
    let url = Url::parse(text).ok()?;
    (is_loopback(&url) && url.fragment().is_none() && url.username().is_empty() && url.password().is_none())
        .then_some(url)
}

/// Who signs in: the local User, or a new local User the hint names
/// (`dev-user-` and up to 40 letters, digits, `-` or `_`).
fn login_subject(hint: Option<&str>) -> String {
    let new_user = hint.filter(|h| {
        h.strip_prefix(NEW_USER_PREFIX).is_some_and(|rest| {
            (1..=40).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
    });
    new_user.unwrap_or(SUBJECT).to_owned()
}

/// RFC 7636 §4.1: 43 to 128 characters of `[A-Za-z0-9-._~]`.
fn valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// An S256 challenge is the base64url SHA-256 of the verifier: 43 characters.
fn valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43 && challenge.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The requested scopes this issuer knows, in the request's order.
fn granted_scope(requested: Option<&str>) -> String {
    let requested = requested.unwrap_or("openid");
    let mut granted: Vec<&str> = Vec::new();
    for scope in requested.split(' ').filter(|s| SCOPES.contains(s)) {
        if !granted.contains(&scope) {
            granted.push(scope);
        }
    }
    granted.join(" ")
}

/// `GET /dev/oidc/authorize`: signs the local User in at once and sends the
/// browser back with a code. Authorization Code with S256 PKCE only.
pub async fn authorize(State(idp): State<Arc<DevIdp>>, uri: Uri) -> Response {
    let query = match parameters(uri.query().unwrap_or_default().as_bytes()) {
        Ok(query) => query,
        Err(problem) => return page(problem),
    };
    let param = |name: &str| query.get(name).map(String::as_str);
    if param("client_id") != Some(idp.client_id.as_str()) {
        return page(format!("unknown client_id; this issuer knows only `{}`", idp.client_id));
    }
    let Some(redirect_uri) = param("redirect_uri") else {
        return page("redirect_uri is required");
    };
    let Some(back) = loopback_redirect(redirect_uri) else {
        return page("redirect_uri must be a loopback address (http://127.0.0.1:PORT/..., RFC 8252)");
    };
    let state = param("state");
    let refuse = |error: &str, description: &str| {
        let mut pairs = vec![("error", error), ("error_description", description)];
        pairs.extend(state.map(|state| ("state", state)));
        pairs.push(("iss", idp.issuer.as_str()));
        redirect(back.clone(), &pairs)
    };
    if param("response_type") != Some("code") {
        return refuse("unsupported_response_type", "Only response_type=code is supported.");
    }
    if param("code_challenge_method") != Some("S256") {
        return refuse("invalid_request", "PKCE is required, with code_challenge_method=S256.");
    }
    let Some(challenge) = param("code_challenge").filter(|c| valid_challenge(c)) else {
        return refuse("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier.");
    };
    if query.contains_key("request") || query.contains_key("request_uri") {
        return refuse("request_not_supported", "Request objects are not supported.");
    }
    let Ok(code) = random_token(32) else {
        return refuse("server_error", "No randomness available.");
    };
    let grant = CodeGrant {
        subject: login_subject(param("login_hint")),
        redirect_uri: redirect_uri.to_owned(),
        challenge: challenge.to_owned(),
        scope: granted_scope(param("scope")),
        nonce: param("nonce").map(str::to_owned),
        expires: Instant::now() + CODE_LIFETIME,
    };
    idp.grants.add_code(code.clone(), grant);
    let mut pairs = vec![("code", code.as_str())];
    pairs.extend(state.map(|state| ("state", state)));
    pairs.push(("iss", idp.issuer.as_str()));
    redirect(back, &pairs)
}

/// An OAuth error answer of the token and revocation endpoints (RFC 6749 §5.2).
struct OauthError {
    error: &'static str,
    description: String,
}

fn refused(error: &'static str, description: impl Into<String>) -> OauthError {
    OauthError { error, description: description.into() }
}

impl IntoResponse for OauthError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.error, "error_description": self.description });
        (StatusCode::BAD_REQUEST, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
    }
}

/// The form body of a token or revocation request, from the issuer's client.
fn client_form(idp: &DevIdp, headers: &HeaderMap, body: &[u8]) -> Result<HashMap<String, String>, OauthError> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(refused("invalid_request", "Send the parameters as application/x-www-form-urlencoded."));
    }
    let form = parameters(body).map_err(|problem| refused("invalid_request", problem))?;
    if form.get("client_id") != Some(&idp.client_id) {
        return Err(refused(
            "invalid_client",
            format!("This issuer knows only the public client `{}`.", idp.client_id),
        ));
    }
    Ok(form)
}

/// `POST /dev/oidc/token`: `authorization_code` (with the PKCE verifier) and
/// `refresh_token`.
pub async fn token(State(idp): State<Arc<DevIdp>>, headers: HeaderMap, body: Bytes) -> Response {
    let answer = client_form(&idp, &headers, &body).and_then(|form| {
        let param = |name: &str| form.get(name).map(String::as_str);
        match param("grant_type") {
            Some("authorization_code") => {
                exchange_code(&idp, param("code"), param("redirect_uri"), param("code_verifier"))
            }
            Some("refresh_token") => refresh(&idp, param("refresh_token")),
            Some(_) => Err(refused("unsupported_grant_type", "Use authorization_code or refresh_token.")),
            None => Err(refused("invalid_request", "grant_type is required.")),
        }
    });
    match answer {
        Ok(tokens) => {
            ([(header::CACHE_CONTROL, "no-store"), (header::PRAGMA, "no-cache")], Json(tokens)).into_response()
        }
        Err(error) => error.into_response(),
    }
}

fn exchange_code(
    idp: &DevIdp,
    code: Option<&str>,
    redirect_uri: Option<&str>,
    verifier: Option<&str>,
) -> Result<Value, OauthError> {
    let code = code.ok_or_else(|| refused("invalid_request", "code is required."))?;
    let verifier = verifier.ok_or_else(|| refused("invalid_request", "code_verifier is required (PKCE)."))?;
    let grant = idp
        .grants
        .take_code(code)
        .ok_or_else(|| refused("invalid_grant", "The code is unknown, used already, or expired."))?;
    if redirect_uri != Some(grant.redirect_uri.as_str()) {
        return Err(refused("invalid_grant", "redirect_uri differs from the authorization request's."));
    }
    let matches = valid_verifier(verifier)
        && aws_lc_rs::constant_time::verify_slices_are_equal(s256(verifier).as_bytes(), grant.challenge.as_bytes())
            .is_ok();
    if !matches {
        return Err(refused("invalid_grant", "The code_verifier does not match the code_challenge."));
    }
    issue(idp, &grant.subject, &grant.scope, grant.nonce.as_deref())
}

fn refresh(idp: &DevIdp, token: Option<&str>) -> Result<Value, OauthError> {
    let token = token.ok_or_else(|| refused("invalid_request", "refresh_token is required."))?;
    let grant = idp
        .grants
        .take_refresh(token)
        .ok_or_else(|| refused("invalid_grant", "The refresh token is unknown, used already, or expired."))?;
    issue(idp, &grant.subject, &grant.scope, None)
}

/// A token answer: an access token, a new refresh token and, for `openid`, an
/// ID token.
fn issue(idp: &DevIdp, subject: &str, scope: &str, nonce: Option<&str>) -> Result<Value, OauthError> {
    let failed = |error: anyhow::Error| refused("server_error", error.to_string());
    let (access_token, _) = idp.access_token_of(subject, scope, ACCESS_TOKEN_LIFETIME).map_err(failed)?;
    let refresh_token = random_token(32).map_err(failed)?;
    idp.grants.add_refresh(refresh_token.clone(), subject, scope);
    let mut answer = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_LIFETIME.as_secs(),
        "refresh_token": refresh_token,
        "scope": scope,
    });
    if scope.split(' ').any(|s| s == "openid") {
        answer["id_token"] = idp.id_token(subject, nonce, ACCESS_TOKEN_LIFETIME).map_err(failed)?.into();
    }
    Ok(answer)
}

/// `GET /dev/oidc/userinfo` with `Authorization: Bearer <access token>`: the
/// User's claims (OpenID Connect Core §5.3), or 401 (RFC 6750 §3).
pub async fn user_info(State(idp): State<Arc<DevIdp>>, headers: HeaderMap) -> Response {
    let token =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    match token.and_then(|token| idp.user_info(token)) {
        Some(claims) => ([(header::CACHE_CONTROL, "no-store")], Json(claims)).into_response(),
        None => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")]).into_response()
        }
    }
}

/// `POST /dev/oidc/revoke` (RFC 7009): forgets a refresh token. Unknown tokens
/// are answered the same way.
pub async fn revoke(State(idp): State<Arc<DevIdp>>, headers: HeaderMap, body: Bytes) -> Response {
    let form = match client_form(&idp, &headers, &body) {
        Ok(form) => form,
        Err(error) => return error.into_response(),
    };
    match form.get("token") {
        Some(token) => {
            idp.grants.take_refresh(token);
            StatusCode::OK.into_response()
        }
        None => refused("invalid_request", "token is required.").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_shapes() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        // RFC 7636 appendix B.
        assert_eq!(s256(verifier), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert!(valid_verifier(verifier) && valid_challenge(&s256(verifier)));
        assert!(!valid_verifier("short") && !valid_verifier(&"a".repeat(129)) && !valid_verifier(&"é".repeat(43)));
        assert!(!valid_challenge(verifier.get(..42).unwrap()) && !valid_challenge(&format!("{}=", &verifier[..42])));
    }

    #[test]
    fn a_login_hint_names_a_new_local_user_or_nobody() {
        assert_eq!(login_subject(Some("dev-user-abc_1")), "dev-user-abc_1");
        for other in [
            None,
            Some("admin"),
            Some("dev-user-"),
            Some("dev-user-a b"),
            Some(&*format!("dev-user-{}", "x".repeat(41))),
        ] {
            assert_eq!(login_subject(other), SUBJECT, "{other:?}");
        }
    }

    #[test]
    fn parameters_appear_once() {
        assert_eq!(parameters(b"a=1&b=x%20y").unwrap()["b"], "x y");
        assert!(parameters(b"a=1&a=2").is_err());
    }

    #[test]
    fn scopes_are_filtered_and_deduplicated() {
        assert_eq!(granted_scope(Some("openid admin email openid")), "openid email");
        assert_eq!(granted_scope(None), "openid");
    }
}
