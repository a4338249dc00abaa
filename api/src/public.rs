//! The end-user side of Public Chat (contract §12), with no credential: the
//! answers endpoint and the chat page.
//!
//! - `POST /api/public/chat/{agentId}/answers` answers while the Agent's Public
//!   Chat is enabled (and its Workspace neither archived nor without an active
//!   Entitlement; otherwise 404), to requests from the chat page or from an
//!   exact allowed Widget origin (otherwise 403 and no CORS grant), within a
//!   per-client rate limit (otherwise 429 with `Retry-After`). `OPTIONS` is the
//!   CORS preflight.
//! - `GET /api/public/chat/{agentId}/widget`: the public parts of the Widget
//!   configuration ([`PublicWidget`]), under the same admission and CORS grant
//!   as the answers endpoint, cached briefly per `Origin`. Its refusals (403
//!   `permission_denied`, 404) carry no data and are granted to the asking
//!   origin, so the Widget can tell "not on this site" from a network failure.
//! - `GET /chat/{agentId}`: the chat page under a strict
//!   `Content-Security-Policy`: the Widget drawn inline by a script served
//!   from this origin (the same code as the `svc-widget-react` package), its
//!   style and icon from here too.
//!
//! Whether to answer, and the answer, are the core's; this module reads the
//! request and writes the headers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use axum::Extension;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use svc_contract::Problem;
use svc_contract::chat::{AnswerSource, PublicAnswer, PublicWidget};
use svc_contract::resources::Language;
use svc_core::chat::{self, PublicAgent};
use svc_core::ids::AgentId;

use crate::access::Called;
use crate::app::AppState;
use crate::html::escape;
use crate::limit::RateLimiter;
use crate::operations::{declared_length, header_str};
use crate::response::{self, RequestId};

/// Largest body of a question: 2,000 characters of up to 4 bytes, and room for
/// the JSON around them.
const QUESTION_BODY_LIMIT: usize = 16 * 1024;
/// Seconds a browser may cache a preflight's answer.
const PREFLIGHT_MAX_AGE: &str = "600";

const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                        img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What the public side knows beyond the service.
pub struct PublicSide {
    limiter: RateLimiter,
    /// The chat page's origin, as browsers send it in `Origin`.
    page_origin: String,
    /// The header a trusted reverse proxy puts the client's address in.
    client_ip_header: Option<HeaderName>,
}

impl PublicSide {
    pub fn new(public_base_url: &str, answers_per_minute: u32, client_ip_header: Option<HeaderName>) -> Self {
        Self {
            limiter: RateLimiter::new(answers_per_minute),
            page_origin: chat::chat_page_origin(public_base_url),
            client_ip_header,
        }
    }

    /// The client's address: the rightmost address in the trusted proxy's
    /// header when one is configured and present (what that proxy saw), else
    /// the connection's peer.
    fn client_ip(&self, request: &Request) -> IpAddr {
        let forwarded = self.client_ip_header.as_ref().and_then(|name| {
            let values = request.headers().get_all(name).iter().filter_map(|v| v.to_str().ok());
            let last = values.flat_map(|v| v.split(',')).last()?;
            last.trim().parse::<IpAddr>().ok()
        });
        forwarded
            .or_else(|| request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip()))
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }
}

/// The answers endpoint's methods.
pub fn answers_route() -> MethodRouter<AppState> {
    post(answers).options(preflight).fallback(|Extension(id): Extension<RequestId>| async move {
        let mut response = response::method_not_allowed(&id);
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, OPTIONS"));
        response
    })
}

/// The widget configuration endpoint's methods.
pub fn widget_route() -> MethodRouter<AppState> {
    get(widget).fallback(|Extension(id): Extension<RequestId>| async move {
        let problem = Problem::invalid("method_not_allowed", "Use GET.");
        let mut response = response::problem(&problem, &id);
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET"));
        response
    })
}

pub fn page_route() -> MethodRouter<AppState> {
    get(page)
}

/// The chat page's script: the Widget, built from `widget/src` (a test of
/// the widget package keeps it in step).
pub fn script_route() -> MethodRouter<AppState> {
    get(|| async { asset("text/javascript; charset=utf-8", include_str!("../assets/widget.js")) })
}

/// The icon of the chat page, also at `/favicon.ico`, so no visit ends in a
/// failed request.
pub fn icon_route() -> MethodRouter<AppState> {
    get(|| async { asset("image/svg+xml", include_str!("../assets/icon.svg")) })
}

pub fn style_route() -> MethodRouter<AppState> {
    get(|| async { asset("text/css; charset=utf-8", include_str!("../assets/chat.css")) })
}

/// The Agent, if it answers the public now.
async fn answering(state: &AppState, agent: &str) -> Result<PublicAgent, Problem> {
    let not_found = || Problem::not_found("Public Chat");
    let id = AgentId::parse(agent).ok_or_else(not_found)?;
    let mut conn = svc_core::runtime::connection(state.service.pool())
        .await
        .map_err(|e| svc_core::error::Error::from(e).into_problem())?;
    chat::answering_agent(&mut conn, id).await.map_err(svc_core::error::Error::into_problem)?.ok_or_else(not_found)
}

/// The Agent, if it answers the public now and this request's `Origin` may
/// ask it: the origin to grant CORS to.
async fn admitted(state: &AppState, agent: &str, headers: &HeaderMap) -> Result<(PublicAgent, HeaderValue), Problem> {
    let agent = answering(state, agent).await?;
    // No `Origin` (not a browser's request, or a browser hiding it) is no grant.
    let origin = header_str(headers, header::ORIGIN.as_str());
    match origin {
        Some(text) if agent.admits(text, &state.public.page_origin) => {
            let granted = HeaderValue::from_str(text).map_err(|_| Problem::internal())?;
            Ok((agent, granted))
        }
        _ => Err(Problem::permission_denied(
            "Answers are given to the Public Chat page and to the Widget on its allowed origins only.",
        )
        .with_detail("reason", "origin_not_allowed")),
    }
}

async fn answers(
    state: State<AppState>,
    request_id: Extension<RequestId>,
    agent: Result<Path<String>, PathRejection>,
    request: Request,
) -> Response {
    let mut response = answer(state, request_id, Path(agent_id(agent)), request).await;
    response.extensions_mut().insert(Called("public.answers".into()));
    response
}

async fn answer(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    Path(agent): Path<String>,
    request: Request,
) -> Response {
    let (agent, origin) = match admitted(&state, &agent, request.headers()).await {
        Ok(admitted) => admitted,
        Err(problem) => return refused(&problem, &request_id, None),
    };
    let client = state.public.client_ip(&request);
    if let Err(wait) = state.public.limiter.take(client, agent.agent.id, Instant::now()) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let problem = Problem::new(svc_contract::ProblemCode::LimitExceeded, "Too many questions; wait a moment.")
            .with_detail("reason", "rate_limited")
            .with_detail("perMinute", state.public.limiter.per_minute())
            .with_transport_status(429);
        let mut response = refused(&problem, &request_id, Some(&origin));
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return response;
    }
    let declared = declared_length(request.headers());
    let body = match state.bodies.read(request.into_body(), QUESTION_BODY_LIMIT, declared).await {
        Ok(body) => body,
        Err(problem) => return refused(&problem, &request_id, Some(&origin)),
    };
    let question = match chat::read_question(&body) {
        Ok(question) => question,
        Err(problem) => return refused(&problem, &request_id, Some(&origin)),
    };
    let asked = chat::ask(state.service.engine(), &agent, &question.text, question.conversation).await;
    match asked {
        Ok(asked) => {
            let answer = PublicAnswer {
                answer: asked.answer.text,
                conversation_id: asked.conversation.to_string(),
                sources: asked
                    .answer
                    .sources
                    .into_iter()
                    .map(|s| AnswerSource { source_id: s.id.to_string(), title: s.title, uri: s.uri })
                    .collect(),
            };
            let mut response = (StatusCode::OK, axum::Json(answer)).into_response();
            response::set_request_id(response.headers_mut(), &request_id);
            grant(response.headers_mut(), &origin);
            response
        }
        Err(error) => refused(&error.into_problem(), &request_id, Some(&origin)),
    }
}

/// Seconds a browser may keep a Widget configuration: a change reaches the
/// Widget within a minute.
const WIDGET_MAX_AGE: &str = "public, max-age=60";

/// `GET /api/public/chat/{agentId}/widget`.
async fn widget(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    agent: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let mut response = match admitted(&state, &agent_id(agent), &headers).await {
        Ok((agent, origin)) => {
            let body = PublicWidget::of(agent.agent.id.to_string(), &agent.widget);
            let mut response = (StatusCode::OK, axum::Json(body)).into_response();
            let out = response.headers_mut();
            response::set_request_id(out, &request_id);
            grant(out, &origin);
            out.insert(header::CACHE_CONTROL, HeaderValue::from_static(WIDGET_MAX_AGE));
            response
        }
        Err(problem) => {
            // A refusal says only "not here": the asking origin may read it.
            // Anything else (a failing database) keeps the answers endpoint's rule.
            let readable = matches!(
                problem.code,
                svc_contract::ProblemCode::PermissionDenied | svc_contract::ProblemCode::ResourceNotFound
            );
            let origin = header_str(&headers, header::ORIGIN.as_str()).and_then(|o| HeaderValue::from_str(o).ok());
            let mut response = refused(&problem, &request_id, origin.as_ref().filter(|_| readable));
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    };
    response.extensions_mut().insert(Called("public.widget".into()));
    response
}

/// The Agent id in the path; one that is not even text (bad percent-encoding)
/// names no Agent, which is answered as any unknown one is.
fn agent_id(path: Result<Path<String>, PathRejection>) -> String {
    path.map(|Path(agent)| agent).unwrap_or_default()
}

/// The CORS preflight of the answers endpoint.
async fn preflight(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    agent: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let (_, origin) = match admitted(&state, &agent_id(agent), &headers).await {
        Ok(admitted) => admitted,
        Err(problem) => return refused(&problem, &request_id, None),
    };
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    grant(out, &origin);
    out.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST"));
    out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type"));
    out.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(PREFLIGHT_MAX_AGE));
    response::set_request_id(out, &request_id);
    response
}

/// A failure, with a CORS grant only for an admitted origin.
fn refused(problem: &Problem, request_id: &RequestId, origin: Option<&HeaderValue>) -> Response {
    let mut response = response::problem(problem, request_id);
    let headers = response.headers_mut();
    match origin {
        Some(origin) => grant(headers, origin),
        None => {
            headers.insert(header::VARY, HeaderValue::from_static("Origin"));
        }
    }
    response
}

fn grant(headers: &mut HeaderMap, origin: &HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("retry-after, x-request-id"));
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
}

/// `GET /chat/{agentId}`: the chat page while the Agent answers the public, a
/// 404 page otherwise.
async fn page(State(state): State<AppState>, agent: Result<Path<String>, PathRejection>) -> Response {
    let agent = agent_id(agent);
    match answering(&state, &agent).await {
        Ok(agent) => {
            let mut response = html(StatusCode::OK, &chat_page(&agent));
            if let Ok(csp) = HeaderValue::from_str(&page_csp(&agent)) {
                response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, csp);
            }
            response
        }
        Err(problem) if problem.code == svc_contract::ProblemCode::ResourceNotFound => {
            html(StatusCode::NOT_FOUND, NOT_FOUND_PAGE)
        }
        Err(problem) => {
            let status = StatusCode::from_u16(problem.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            html(status, UNAVAILABLE_PAGE)
        }
    }
}

fn html(status: StatusCode, page: &str) -> Response {
    let mut response = (status, page.to_owned()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    security_headers(headers);
    response
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    security_headers(headers);
    response
}

fn security_headers(headers: &mut HeaderMap) {
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The page around the Widget: its script draws the Agent's Widget inline
/// from the configuration the page carries as data (no inline script, no
/// second request), in the Widget's language and colours.
fn chat_page(agent: &PublicAgent) -> String {
    let widget = PublicWidget::of(agent.agent.id.to_string(), &agent.widget);
    let language: Language = widget.default_language;
    // Inside <script>, `<` could end the element: JSON lets it be escaped.
    let data = serde_json::to_string(&widget).unwrap_or_default().replace('<', "\\u003c");
    let headline = match widget.appearance.headline.trim() {
        "" => agent.agent.name.as_str(),
        headline => headline,
    };
    let noscript = match language {
        Language::En => "This chat needs JavaScript.",
        Language::Es => "Este chat necesita JavaScript.",
    };
    format!(
        r#"<!doctype html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<link rel="icon" href="assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="assets/chat.css">
<script src="assets/widget.js" defer></script>
<script type="application/json" id="svc-chat-data">{data}</script>
</head>
<body class="{theme}">
<main>
<h1 class="visually-hidden">{headline}</h1>
<div id="chat" class="chat"></div>
<noscript><p>{noscript}</p></noscript>
</main>
</body>
</html>
"#,
        lang = language.as_str(),
        title = escape(&agent.agent.name),
        headline = escape(headline),
        theme = match widget.appearance.theme {
            svc_contract::chat::Theme::Light => "light",
            svc_contract::chat::Theme::Dark => "dark",
            svc_contract::chat::Theme::Auto => "auto",
        },
    )
}

/// The page's policy: [`PAGE_CSP`], with the origin of the Agent's logo
/// allowed as an image (the only thing the page loads from elsewhere).
fn page_csp(agent: &PublicAgent) -> String {
    let logo = url::Url::parse(&agent.widget.appearance.logo_url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .map(|url| url.origin().ascii_serialization());
    match logo {
        Some(origin) => PAGE_CSP.replace("img-src 'self'", &format!("img-src 'self' {origin}")),
        None => PAGE_CSP.to_owned(),
    }
}

const NOT_FOUND_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat not available</title></head>
<body><main><h1>This chat is not available</h1>
<p>There is no public chat at this address, or it has been turned off.</p></main></body>
</html>
"#;

const UNAVAILABLE_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat unavailable</title></head>
<body><main><h1>The chat is unavailable right now</h1><p>Please try again in a moment.</p></main></body>
</html>
"#;
