//! OAuth 2.0 Protected Resource Metadata (RFC 9728) and the challenge of every
//! 401, which points at it.

use axum::body::Body;
use serde_json::json;
use sqlx::PgPool;
use svc_api::config::ServeConfig;
use svc_tests::ISSUER;
use svc_tests::http::TestResponse;

use crate::helpers::{BASE_URL, TestApp, assert_problem, config};

/// The `WWW-Authenticate` of a 401 from the test configuration's server: the
/// API's document for HTTP operations...
pub const CHALLENGE: &str = "Bearer resource_metadata=\"http://svc.test/.well-known/oauth-protected-resource\"";
/// ... and the MCP endpoint's for MCP (RFC 9728 §3.1: the well-known path plus
/// the resource's own).
pub const MCP_CHALLENGE: &str =
    "Bearer resource_metadata=\"http://svc.test/.well-known/oauth-protected-resource/api/mcp\"";

async fn get(app: &TestApp, path: &str) -> TestResponse {
    app.send(http::Request::get(path).body(Body::empty()).unwrap()).await
}

#[sqlx::test(migrations = "../migrations")]
async fn the_protected_resource_document_names_the_issuer(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    // Each document names the resource it describes (RFC 9728 §3.3: a client
    // drops a document naming another one).
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", BASE_URL.to_owned()),
        ("/.well-known/oauth-protected-resource/api/mcp", format!("{BASE_URL}/api/mcp")),
    ] {
        let response = get(&app, path).await;
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(
            response.json(),
            json!({
                "resource": resource,
                "authorization_servers": [ISSUER],
                "bearer_methods_supported": ["header"],
                "resource_name": "svc",
            }),
            "{path}"
        );
    }
    // Without an issuer only API keys authenticate: the document names no server.
    let keys_only = TestApp::with_config(pool, ServeConfig { oidc_issuer: None, ..config() }).await;
    let document = get(&keys_only, "/.well-known/oauth-protected-resource").await.json();
    assert_eq!(document["resource"], BASE_URL);
    assert!(document.get("authorization_servers").is_none(), "{document}");
}

#[sqlx::test(migrations = "../migrations")]
async fn every_401_points_at_the_resource_metadata(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let mcp = app.mcp(None, None, list).await;
    assert_problem(&mcp, 401, "authentication_required");
    assert_eq!(mcp.header("www-authenticate"), Some(MCP_CHALLENGE));

    let http = app.op("identity/status", "svck_unknown_0000", None, json!({})).await;
    assert_problem(&http, 401, "authentication_required");
    assert_eq!(http.header("www-authenticate"), Some(CHALLENGE));
    let expired = app.issuer().sign(
        svc_tests::Alg::Es256,
        &json!({ "iss": ISSUER, "aud": svc_tests::AUDIENCE, "sub": "alice", "exp": 1, "iat": 0 }),
    );
    let reauthenticate = app.op("identity/status", &expired, None, json!({})).await;
    assert_problem(&reauthenticate, 401, "reauthentication_required");
    assert_eq!(reauthenticate.header("www-authenticate"), Some(CHALLENGE));

    // Other refusals carry no challenge.
    let not_set_up = app.op("identity/status", &app.issuer().token("nobody"), None, json!({})).await;
    assert_problem(&not_set_up, 403, "setup_required");
    assert!(not_set_up.header("www-authenticate").is_none());
}
