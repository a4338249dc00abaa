//! The access log: one line per request at `info`, written when the response
//! is ready.
//!
//! A line names the surface, the operation (an HTTP operation's id, or an MCP
//! message's tool or method), the status, the duration and the request id. It
//! never carries a header, a query string or a body, so no credential reaches
//! the log through it.

use std::borrow::Cow;
use std::time::Instant;

use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;

use crate::metrics::{Metrics, surface_of};
use crate::response::RequestId;

/// Longest path written; a longer one is cut (paths are the client's text).
const MAX_LOGGED_PATH: usize = 160;

/// What a handler answered, put on its response for the access line.
#[derive(Clone, Debug)]
pub struct Called(pub Cow<'static, str>);

/// One request's access line, begun when the request arrives and written when
/// its response is ready (see `app::edge`).
pub struct Line {
    started: Instant,
    request_id: String,
    method: Method,
    path: String,
}

impl Line {
    pub fn begin(request: &Request, request_id: &RequestId) -> Self {
        Self {
            started: Instant::now(),
            request_id: request_id.0.clone(),
            method: request.method().clone(),
            path: logged_path(request.uri().path()).into_owned(),
        }
    }

    /// The span the request runs in: every line it logs carries its id.
    pub fn span(&self) -> tracing::Span {
        tracing::info_span!("request", request_id = %self.request_id)
    }

    /// Writes the line and counts the response.
    pub fn end(self, metrics: &Metrics, response: &Response) {
        let elapsed = self.started.elapsed();
        let surface = surface(&self.path);
        metrics.responses.record(surface_of(surface, &self.method, &self.path), response.status().as_u16(), elapsed);
        let operation = response.extensions().get::<Called>().map(|c| c.0.as_ref()).unwrap_or("-");
        tracing::info!(
            target: "svc_api::access",
            surface,
            operation,
            method = %self.method,
            path = %self.path,
            status = response.status().as_u16(),
            duration_ms = (elapsed.as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
            request_id = %self.request_id,
            "request"
        );
    }
}

fn logged_path(path: &str) -> Cow<'_, str> {
    match path.char_indices().nth(MAX_LOGGED_PATH) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &path[..cut])),
        None => Cow::Borrowed(path),
    }
}

/// Which door a request came in by.
fn surface(path: &str) -> &'static str {
    if path.starts_with("/api/public/operations/") {
        "http"
    } else if path.starts_with("/api/mcp") {
        "mcp"
    } else if path.starts_with("/api/public/chat/") || path.starts_with("/chat/") {
        "public"
    } else if matches!(path, "/healthz" | "/readyz" | "/metrics") {
        "health"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_are_cut_on_a_character_boundary() {
        let long = "é".repeat(500);
        let logged = logged_path(&long);
        assert_eq!(logged.chars().count(), MAX_LOGGED_PATH + 1);
        assert_eq!(logged_path("/healthz"), "/healthz");
    }

    #[test]
    fn surfaces() {
        assert_eq!(surface("/api/public/operations/agents/create"), "http");
        assert_eq!(surface("/api/mcp"), "mcp");
        assert_eq!(surface("/api/public/chat/agt_1/answers"), "public");
        assert_eq!(surface("/chat/agt_1"), "public");
        assert_eq!(surface("/readyz"), "health");
        assert_eq!(surface("/api/public/catalog"), "other");
    }
}
