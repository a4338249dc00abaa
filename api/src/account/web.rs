//! What every page of the web application shares: the request it answers,
//! cookies, the CSRF check, form bodies, HTML escaping and templates, and the
//! security headers.

use std::cell::Cell;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use svc_contract::Operation;

use crate::access::Called;
use crate::response::RequestId;

/// The browser session's cookie (an opaque token; only its SHA-256 is stored).
pub const SESSION_COOKIE: &str = "svc_session";
/// Binds a sign-in under way to the browser that started it.
pub const SIGN_IN_COOKIE: &str = "svc_sign_in";
/// An invite code on its way through sign-in and setup.
pub const INVITE_COOKIE: &str = "svc_invite";
/// The double-submit token of forms shown before sign-in.
pub const FORM_COOKIE: &str = "svc_form";
/// Every cookie of the application is scoped to it.
pub const COOKIE_PATH: &str = "/account";

tokio::task_local! {
    /// The request a page answers.
    static ANSWERING: Answering;
}

/// A request of the application: its id (given by the edge; an error page
/// shows it, so a User can quote it), and the operation its form called
/// (named in the access line, as an operation call's is).
struct Answering {
    id: RequestId,
    called: Cell<Option<&'static str>>,
}

/// Runs a request of the application as [`Answering`] it.
pub async fn answering(request: Request, next: Next) -> Response {
    let id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    let answering = Answering { id, called: Cell::new(None) };
    ANSWERING
        .scope(answering, async move {
            let mut response = next.run(request).await;
            if let Ok(Some(op)) = ANSWERING.try_with(|a| a.called.get()) {
                response.extensions_mut().insert(Called(op.into()));
            }
            response
        })
        .await
}

/// Records that the request called `op`, a mutating operation.
pub fn called(op: &'static Operation) {
    if op.mutating {
        let _ = ANSWERING.try_with(|a| a.called.set(Some(op.id)));
    }
}

/// The id of the request being answered.
fn request_id() -> Option<String> {
    ANSWERING.try_with(|a| a.id.0.clone()).ok()
}

/// A fresh idempotency key for one form: posting that form again (a double
/// click, a reload) answers as the first post did.
pub fn form_key() -> String {
    // Without randomness the form goes without one: its post is then simply
    // not idempotent.
    svc_core::auth::relying_party::random_token().map(|t| format!("account-{t}")).unwrap_or_default()
}

/// The value of cookie `name`, if the request carries it once.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(n, _)| *n == name)
        .map(|(_, value)| value);
    let value = found.next()?;
    // Two cookies of one name (one planted for a wider path, say): trust neither.
    found.next().is_none().then_some(value).filter(|v| !v.is_empty())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, scoped to the application,
/// Secure when the service is reached over https, expiring after `max_age_secs`
/// (0 deletes it).
pub fn set_cookie(name: &str, value: &str, max_age_secs: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{name}={value}; Path={COOKIE_PATH}; Max-Age={max_age_secs}; HttpOnly; SameSite=Lax{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// The CSRF token of a session's forms: derived from the session token, so
/// nothing more is stored, and useless without the cookie it came from.
pub fn csrf_token(session_token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"svc-account-csrf\0");
    hasher.update(session_token.as_bytes());
    URL_SAFE_NO_PAD.encode(hasher.finalize())
}

/// Constant-time comparison of a presented token with the expected one.
pub fn same(presented: Option<&str>, expected: &str) -> bool {
    presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(expected.as_bytes())))
}

/// A form body (`application/x-www-form-urlencoded`), each field once.
pub struct Form(Vec<(String, String)>);

impl Form {
    pub fn parse(body: &Bytes) -> Self {
        Self(url::form_urlencoded::parse(body).into_owned().collect())
    }

    /// The field's value when it appears exactly once.
    pub fn get(&self, name: &str) -> Option<&str> {
        let mut values = self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let value = values.next()?;
        values.next().is_none().then_some(value)
    }

    /// Every value of a repeated field (checkboxes).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }
}

pub use crate::html::escape;

/// HTML already made safe (escaped or built from escaped parts).
pub struct Html(pub String);

/// Fills a template: `{{name}}` gets the escaped text, `{{{name}}}` HTML.
pub fn render(template: &str, text: &[(&str, &str)], html: &[(&str, &Html)]) -> Html {
    let mut out = template.to_owned();
    for (name, value) in html {
        out = out.replace(&format!("{{{{{{{name}}}}}}}"), &value.0);
    }
    for (name, value) in text {
        out = out.replace(&format!("{{{{{name}}}}}"), &escape(value));
    }
    Html(out)
}

const LAYOUT: &str = include_str!("templates/layout.html");

/// A whole page: the layout around `main`, with the security headers.
pub fn page(status: StatusCode, title: &str, main: Html, signed_in_as: Option<(&str, &str)>) -> Response {
    let header_html = match signed_in_as {
        Some((who, csrf)) => render(include_str!("templates/signed_in.html"), &[("who", who), ("csrf", csrf)], &[]),
        None => Html(String::new()),
    };
    let body = render(LAYOUT, &[("title", title)], &[("header", &header_html), ("main", &main)]);
    let mut response = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body.0).into_response();
    secure(response.headers_mut());
    response
}

/// The headers of every response of the application: a strict CSP (scripts
/// and styles from this origin only, no inline script), no framing, no
/// referrer (an invite link must not leak), nothing cached.
pub fn secure(headers: &mut HeaderMap) {
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// `303 See Other` to a path of the application (after a form post).
pub fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    secure(response.headers_mut());
    response
}

/// A page telling what went wrong, with a way back and the request's id.
pub fn error_page(status: StatusCode, message: &str, back: &str) -> Response {
    let request = request_id().unwrap_or_default();
    let main = render(
        include_str!("templates/error.html"),
        &[("message", message), ("back", back), ("request", &request)],
        &[],
    );
    page(status, "Something went wrong", main, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_templates() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        let html = Html("<b>b</b>".into());
        assert_eq!(render("{{a}} {{{b}}}", &[("a", "<i>")], &[("b", &html)]).0, "&lt;i&gt; <b>b</b>");
    }

    #[test]
    fn cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; svc_session=tok; b=2"));
        assert_eq!(cookie(&headers, "svc_session"), Some("tok"));
        headers.append(header::COOKIE, HeaderValue::from_static("svc_session=other"));
        assert_eq!(cookie(&headers, "svc_session"), None, "two of one name");
        let set = set_cookie("svc_session", "t", 60, true);
        assert_eq!(set, "svc_session=t; Path=/account; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
        assert!(!set_cookie("x", "t", 60, false).to_str().unwrap().contains("Secure"));
    }

    #[test]
    fn csrf_tokens_differ_per_session_and_compare_exactly() {
        let (a, b) = (csrf_token("one"), csrf_token("two"));
        assert_ne!(a, b);
        assert!(same(Some(&a), &a) && !same(Some(&b), &a) && !same(None, &a) && !same(Some(""), &a));
    }
}
