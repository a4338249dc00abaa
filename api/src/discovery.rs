//! Discovery documents (no credentials needed, contract §2), built once.

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use svc_contract::{CONTRACT_VERSION, SUPPORTED_CLIENT_RANGE, catalog, openapi};

use crate::app::AppState;
use crate::config::ServeConfig;

pub struct Documents {
    client_config: Value,
    catalog: Value,
    openapi: Value,
}

impl Documents {
    pub fn new(config: &ServeConfig) -> Self {
        let base = config.public_base_url();
        let oauth = config.issuer().map(|issuer| {
            json!({
                "issuer": issuer,
                "clientId": config.client_id(),
                "scopes": config.oidc_scopes,
            })
        });
        let client_config = json!({
            "contract": CONTRACT_VERSION,
            "catalogDigest": catalog::catalog_digest(),
            "supportedClientRange": SUPPORTED_CLIENT_RANGE,
            "mcpEndpoint": format!("{base}/api/mcp"),
            "oauth": oauth,
        });
        let mut openapi = openapi::document();
        openapi["servers"] = json!([{ "url": base }]);
        Self { client_config, catalog: catalog::document(), openapi }
    }
}

pub async fn client_config(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.documents.client_config.clone())
}

pub async fn catalog(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.documents.catalog.clone())
}

pub async fn openapi(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.documents.openapi.clone())
}
