//! OAuth 2.0 Protected Resource Metadata (RFC 9728): how a client that got a
//! 401, an MCP client above all, finds where to sign in. The document names the
//! issuer of User tokens, and every 401 points at the document from its
//! `WWW-Authenticate` challenge.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::config::ServeConfig;

/// Where the document is (RFC 9728 §3); also served with the resource's path
/// appended, `{PATH}/api/mcp`.
pub const PATH: &str = "/.well-known/oauth-protected-resource";

pub struct ResourceMetadata {
    /// The API as a whole (`{base}`), at [`PATH`].
    api: Resource,
    /// The MCP endpoint (`{base}/api/mcp`), at `{PATH}/api/mcp`: RFC 9728 §3.1
    /// places a resource's document at the well-known path plus its own.
    mcp: Resource,
}

struct Resource {
    document: Value,
    /// `Bearer resource_metadata="..."`, naming this resource's document.
    challenge: HeaderValue,
}

impl Resource {
    fn new(config: &ServeConfig, path: &str) -> Self {
        let base = config.public_base_url();
        let mut document = json!({
            "resource": format!("{base}{path}"),
            "bearer_methods_supported": ["header"],
            "resource_name": "svc",
        });
        // Without an issuer only Workspace API keys authenticate: no server to name.
        if let Some(issuer) = config.issuer() {
            document["authorization_servers"] = json!([issuer]);
        }
        let challenge = HeaderValue::from_str(&format!("Bearer resource_metadata=\"{base}{PATH}{path}\""))
            .ok()
            .filter(|_| !base.contains(['"', '\\']))
            .unwrap_or_else(|| HeaderValue::from_static("Bearer"));
        Self { document, challenge }
    }
}

impl ResourceMetadata {
    pub fn new(config: &ServeConfig) -> Self {
        Self { api: Resource::new(config, ""), mcp: Resource::new(config, MCP_PATH) }
    }

    fn of(&self, request_path: &str) -> &Resource {
        let mcp = request_path == MCP_PATH
            || request_path.strip_prefix(MCP_PATH).is_some_and(|rest| rest.starts_with('/'))
            || request_path.strip_prefix(PATH) == Some(MCP_PATH);
        if mcp { &self.mcp } else { &self.api }
    }
}

/// Where MCP is served.
pub const MCP_PATH: &str = "/api/mcp";

/// The document of the API (at [`PATH`]) or of the MCP endpoint (at
/// `{PATH}/api/mcp`).
pub async fn document(State(state): State<AppState>, request: Request) -> Response {
    Json(state.resource_metadata.of(request.uri().path()).document.clone()).into_response()
}

/// Adds the address of the resource's document to the `Bearer` challenge of
/// every 401: the MCP endpoint's for MCP, the API's for the rest.
pub async fn challenge(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let resource = state.resource_metadata.of(request.uri().path());
    let challenge = resource.challenge.clone();
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && response.headers().get(header::WWW_AUTHENTICATE).is_some_and(|v| v == "Bearer")
    {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}
