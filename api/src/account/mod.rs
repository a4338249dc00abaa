//! The web application at `/account` where Users sign in with the configured
//! OpenID Connect provider, finish first-time setup, find their next steps,
//! manage Workspace API keys and members, and accept invites.
//!
//! Server-rendered pages from templates, one small script of our own (the
//! copy button, the invite code from the link's fragment), a strict CSP. A
//! surface like the others: sessions and setup are `svc_core::account`;
//! Workspaces and API keys are catalog operations, and membership the
//! application's own operations (`svc_contract::catalog::ACCOUNT`), all called
//! through the call path with the User as caller ([`call`]).

mod home;
mod join;
mod keys;
mod members;
mod setup;
mod sign_in;
pub mod web;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use svc_contract::{OperationId, Problem, ProblemCode};
use svc_core::auth::relying_party::{RelyingParty, RelyingPartyConfig};
use svc_core::store::web_sessions::WebSessionRow;
use svc_core::{Caller, ClientHints, Reply};
use url::Url;

use crate::app::AppState;
use crate::config::ServeConfig;
use web::{SESSION_COOKIE, cookie, error_page, see_other};

/// Where the application lives under the base URL.
pub const PATH: &str = "/account";

/// The application's settings and its OpenID Connect client.
pub struct Account {
    /// `None` when no identity provider is configured: the pages say so.
    relying_party: Option<RelyingParty>,
    pub base_url: String,
    /// `Secure` on cookies: when the base URL is https (a browser keeps no
    /// `Secure` cookie that an http page sets).
    secure_cookies: bool,
    /// The CLI's issuer and client id, for the next-steps page.
    cli_hint: String,
    /// With the development identity provider: sign-in may ask for a new
    /// local User, so a local run shows first-time setup too.
    dev: bool,
}

impl Account {
    /// `oidc` is what API tokens are verified with; the ID tokens of the
    /// application's sign-ins come from the same issuer and keys.
    pub fn new(config: &ServeConfig, oidc: Option<&svc_core::OidcConfig>) -> anyhow::Result<Self> {
        let base_url = config.public_base_url();
        let secure_cookies = Url::parse(&base_url).is_ok_and(|url| url.scheme() == "https");
        let relying_party = match (oidc, config.account_client_id()) {
            (Some(oidc), Some(client_id)) => Some(
                RelyingParty::new(RelyingPartyConfig {
                    issuer: oidc.issuer.clone(),
                    client_id,
                    client_secret: config.account_client_secret(),
                    redirect_uri: config.account_redirect_uri(),
                    scopes: vec!["openid".into(), "profile".into(), "email".into()],
                    jwks: oidc.jwks.clone(),
                })
                .map_err(|e| anyhow::anyhow!(e))?,
            ),
            _ => None,
        };
        Ok(Self {
            relying_party,
            cli_hint: format!("svc auth login --endpoint {base_url}"),
            base_url,
            secure_cookies,
            dev: config.dev_idp,
        })
    }

    pub fn url(&self) -> String {
        format!("{}{PATH}", self.base_url)
    }
}

/// The application's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(PATH, get(home::show))
        .route(&format!("{PATH}/sign-in"), get(sign_in::start))
        .route(&format!("{PATH}/callback"), get(sign_in::callback))
        .route(&format!("{PATH}/sign-out"), post(sign_in::sign_out))
        .route(&format!("{PATH}/setup"), get(setup::show).post(setup::preview))
        .route(&format!("{PATH}/setup/confirm"), post(setup::confirm))
        .route(&format!("{PATH}/workspaces"), post(home::create_workspace))
        .route(&format!("{PATH}/workspaces/{{workspace}}"), get(keys::show))
        .route(&format!("{PATH}/workspaces/{{workspace}}/keys"), post(keys::create))
        .route(&format!("{PATH}/workspaces/{{workspace}}/keys/rotate"), post(keys::rotate))
        .route(&format!("{PATH}/workspaces/{{workspace}}/keys/revoke"), post(keys::revoke))
        .route(&format!("{PATH}/workspaces/{{workspace}}/invites"), post(members::invite))
        .route(&format!("{PATH}/workspaces/{{workspace}}/members/role"), post(members::change_role))
        .route(&format!("{PATH}/workspaces/{{workspace}}/members/remove"), post(members::remove))
        .route(&format!("{PATH}/join"), get(join::show).post(join::start))
        .route(&format!("{PATH}/join/confirm"), get(join::confirm))
        .route(&format!("{PATH}/join/accept"), post(join::accept))
        .route(&format!("{PATH}/assets/account.js"), get(script))
        .route(&format!("{PATH}/assets/account.css"), get(style))
        .route(&format!("{PATH}/assets/icon.svg"), get(icon))
        .layer(axum::middleware::from_fn(web::answering))
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", include_str!("assets/account.js"))
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/account.css"))
}

async fn icon() -> Response {
    asset("image/svg+xml", include_str!("assets/icon.svg"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    web::secure(response.headers_mut());
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// A request's browser session, if it has a live one.
pub struct Signed {
    pub session: WebSessionRow,
    /// The CSRF token its forms carry.
    pub csrf: String,
}

impl Signed {
    pub fn who(&self) -> &str {
        self.session.name.as_deref().filter(|n| !n.is_empty()).unwrap_or(&self.session.email)
    }
}

/// The live session the request's cookie names.
pub async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<Option<Signed>, Response> {
    let Some(token) = cookie(headers, SESSION_COOKIE) else { return Ok(None) };
    let session =
        svc_core::account::session(state.service.pool(), token).await.map_err(|e| failure(e.into_problem()))?;
    Ok(session.map(|session| Signed { session, csrf: web::csrf_token(token) }))
}

/// The session, or the answer that sends the browser to sign in.
pub async fn require_session(state: &AppState, headers: &HeaderMap) -> Result<Signed, Response> {
    signed_in(state, headers).await?.ok_or_else(|| see_other(PATH))
}

/// The session of a form post whose CSRF token matches it; anything else is
/// refused before the form is acted on.
pub async fn require_form(state: &AppState, headers: &HeaderMap, form: &web::Form) -> Result<Signed, Response> {
    let signed = signed_in(state, headers).await?;
    match signed {
        Some(signed) if web::same(form.get("csrf"), &signed.csrf) => Ok(signed),
        _ => Err(error_page(
            StatusCode::FORBIDDEN,
            "This form has expired or did not come from this site. Go back, reload the page and try again.",
            PATH,
        )),
    }
}

/// The caller a session stands for, with `workspace` selected: the same
/// checks as a bearer token (setup finished, sessions not revoked).
pub async fn caller(state: &AppState, signed: &Signed, workspace: Option<&str>) -> Result<Caller, Problem> {
    let identity = svc_core::account::identity(&signed.session);
    state.service.session().authenticate_identity(&identity, workspace).await
}

/// Runs an operation (the catalog's, or one of the application's own) as the
/// session's User, through the call path every surface uses: it checks the
/// role, makes the call idempotent with an `idempotencyKey` in `input`, and
/// drops the callers kept when access changed.
pub async fn call(
    state: &AppState,
    signed: &Signed,
    workspace: Option<&str>,
    op: OperationId,
    input: Value,
) -> Result<Reply, Problem> {
    let op = op.operation();
    web::called(op);
    let caller = caller(state, signed, workspace).await?;
    state.service.call(op, &caller, input, &ClientHints::default()).await
}

/// A problem as a page: sign-in again for a revoked session, setup for a User
/// not set up, otherwise the message (never a credential: problems carry none).
pub fn failure(problem: Problem) -> Response {
    match problem.code {
        ProblemCode::SetupRequired => see_other(&format!("{PATH}/setup")),
        ProblemCode::ReauthenticationRequired | ProblemCode::AuthenticationRequired => {
            let mut response = see_other(PATH);
            if let Ok(value) =
                HeaderValue::from_str(&format!("{SESSION_COOKIE}=; Path={}; Max-Age=0", web::COOKIE_PATH))
            {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            response
        }
        // A Workspace of someone else's is simply not there (contract §1).
        ProblemCode::WorkspaceSelectionRequired => error_page(StatusCode::NOT_FOUND, &problem.message, PATH),
        _ => {
            let status = StatusCode::from_u16(problem.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error_page(status, &problem.message, PATH)
        }
    }
}

/// The application's state within the API's.
pub fn of(state: &AppState) -> &Arc<Account> {
    &state.account
}

/// The sign-in page (with the development provider, also as a new User).
pub fn sign_in_page(state: &AppState, title: &str) -> Response {
    let dev = if of(state).dev {
        web::Html(format!(
            "<p><a href=\"{PATH}/sign-in?as=new\">Sign in as a new local User</a> \
             <span class=\"muted\">(development identity provider: shows first-time setup)</span><br>\
             <a href=\"{PATH}/sign-in?as=new-without-email\">Sign in as a new local User without an e-mail address</a> \
             <span class=\"muted\">(as with a provider that gives none: setup asks for it)</span></p>"
        ))
    } else {
        web::Html(String::new())
    };
    let main = web::render(include_str!("templates/sign_in.html"), &[], &[("dev", &dev)]);
    web::page(StatusCode::OK, title, main, None)
}
