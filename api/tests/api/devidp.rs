//! The development identity provider (`serve --dev-idp`), in-process: its
//! discovery and keys, the sign-in (Authorization Code with S256 PKCE only,
//! loopback redirects only), the tokens the API then trusts, and the seeding of
//! the local User, Workspace and API key. The same, driven by a standard OAuth
//! client against the real binary, is in `tests/tests/devidp.rs`.

use std::path::PathBuf;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use svc_api::config::ServeConfig;
use svc_api::devidp::{self, DevSeed};
use svc_api::{AppState, router};
use svc_tests::http::TestResponse;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use url::Url;

use crate::helpers::{TestApp, assert_ok, assert_problem, config};

const BASE: &str = "http://127.0.0.1:8080";
const ISSUER: &str = "http://127.0.0.1:8080/dev/oidc";
const REDIRECT: &str = "http://127.0.0.1:53682/callback";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
/// The S256 challenge of [`VERIFIER`] (RFC 7636 appendix B).
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn env_file() -> PathBuf {
    std::env::temp_dir().join(format!("svc-dev-{}.env", uuid::Uuid::now_v7().simple()))
}

fn dev_config(env_file: PathBuf) -> ServeConfig {
    ServeConfig {
        public_base_url: Some(BASE.to_owned()),
        oidc_issuer: None,
        oidc_audience: None,
        oidc_jwks_file: None,
        oidc_client_id: None,
        dev_idp: true,
        dev_env_file: env_file,
        ..config()
    }
}

/// The API with `--dev-idp`, seeded as `serve` does at start.
struct DevApp {
    router: Router,
    seed: DevSeed,
}

/// The env file a test's app wrote goes with the app, failing or not.
impl Drop for DevApp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.seed.env_file);
    }
}

impl DevApp {
    async fn start(pool: PgPool, env_file: PathBuf) -> Self {
        let config = dev_config(env_file);
        let state = AppState::new(pool, &config).unwrap();
        let seed = devidp::prepare(&state, &config).await.unwrap();
        Self { router: router(state, &config, CancellationToken::new()), seed }
    }

    /// Sends `request` as a local client would: addressed to `127.0.0.1`
    /// unless it names a host itself.
    async fn send(&self, mut request: Request<Body>) -> TestResponse {
        if !request.headers().contains_key("host") {
            request.headers_mut().insert("host", "127.0.0.1:8080".parse().unwrap());
        }
        let response = self.router.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        TestResponse { status: parts.status.as_u16(), headers: parts.headers, body }
    }

    async fn get(&self, path: &str) -> TestResponse {
        self.send(Request::get(path).body(Body::empty()).unwrap()).await
    }

    async fn form(&self, path: &str, pairs: &[(&str, &str)]) -> TestResponse {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
        let request = Request::post(path).header("content-type", "application/x-www-form-urlencoded");
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    async fn op(&self, path: &str, token: &str, input: Value) -> TestResponse {
        let request = Request::post(format!("/api/public/operations/{path}"))
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json");
        self.send(request.body(Body::from(input.to_string())).unwrap()).await
    }

    /// The authorization request with `params` over the usual ones; returns
    /// the response (a redirect, or a refusal page).
    async fn authorize(&self, params: &[(&str, Option<&str>)]) -> TestResponse {
        let mut all: Vec<(&str, Option<&str>)> = vec![
            ("response_type", Some("code")),
            ("client_id", Some("svc-cli")),
            ("redirect_uri", Some(REDIRECT)),
            ("scope", Some("openid email offline_access")),
            ("state", Some("xyz")),
            ("code_challenge", Some(CHALLENGE)),
            ("code_challenge_method", Some("S256")),
        ];
        for (name, value) in params {
            all.retain(|(n, _)| n != name);
            all.push((name, *value));
        }
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(all.iter().filter_map(|(n, v)| v.map(|v| (*n, v))))
            .finish();
        self.get(&format!("/dev/oidc/authorize?{query}")).await
    }

    /// A code for [`VERIFIER`].
    async fn code(&self) -> String {
        let location = redirected(&self.authorize(&[]).await);
        location["code"].clone()
    }

    async fn exchange(&self, code: &str, verifier: &str) -> TestResponse {
        self.form(
            "/dev/oidc/token",
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("client_id", "svc-cli"),
                ("code_verifier", verifier),
            ],
        )
        .await
    }
}

/// The query of a redirect back to the client.
fn redirected(response: &TestResponse) -> std::collections::HashMap<String, String> {
    assert_eq!(response.status, 302, "{}", response.text());
    let location = Url::parse(response.header("location").unwrap()).unwrap();
    assert_eq!(format!("{}{}", location.origin().ascii_serialization(), location.path()), REDIRECT);
    location.query_pairs().into_owned().collect()
}

fn assert_refused(response: &TestResponse, error: &str) {
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.json()["error"], error, "{}", response.text());
    assert_eq!(response.header("cache-control"), Some("no-store"));
}

#[sqlx::test(migrations = "../migrations")]
async fn devidp_publishes_discovery_keys_and_client_config(pool: PgPool) {
    let app = DevApp::start(pool, env_file()).await;
    let discovery = app.get("/dev/oidc/.well-known/openid-configuration").await;
    assert_eq!(discovery.status, 200);
    let document = discovery.json();
    assert_eq!(document["issuer"], ISSUER);
    assert_eq!(document["authorization_endpoint"], format!("{ISSUER}/authorize"));
    assert_eq!(document["token_endpoint"], format!("{ISSUER}/token"));
    assert_eq!(document["jwks_uri"], format!("{ISSUER}/jwks.json"));
    assert_eq!(document["response_types_supported"], json!(["code"]));
    assert_eq!(document["grant_types_supported"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(document["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(document["token_endpoint_auth_methods_supported"], json!(["none"]));
    assert_eq!(document["id_token_signing_alg_values_supported"], json!(["ES256"]));

    let jwks = app.get("/dev/oidc/jwks.json").await.json();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{jwks}");
    let key = &keys[0];
    assert_eq!(
        (&key["kty"], &key["crv"], &key["alg"], &key["use"]),
        (&json!("EC"), &json!("P-256"), &json!("ES256"), &json!("sig"))
    );
    assert!(key["kid"].as_str().is_some_and(|kid| !kid.is_empty()));
    assert!(key.get("d").is_none(), "no private part");
    // The env file's token is signed with that key.
    let header: Value = {
        use base64::Engine;
        let token = std::fs::read_to_string(&app.seed.env_file).unwrap();
        let token = token.lines().find_map(|l| l.strip_prefix("export SVC_TOKEN='")).unwrap().trim_end_matches('\'');
        let part = token.split('.').next().unwrap();
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    };
    assert_eq!((&header["alg"], &header["kid"]), (&json!("ES256"), &key["kid"]));

    // Clients find the issuer and client id where they find any issuer's.
    let client_config = app.get("/api/public/client-config").await.json();
    assert_eq!(client_config["oauth"]["issuer"], ISSUER);
    assert_eq!(client_config["oauth"]["clientId"], "svc-cli");
    for (path, named) in [
        ("/.well-known/oauth-protected-resource", BASE.to_owned()),
        ("/.well-known/oauth-protected-resource/api/mcp", format!("{BASE}/api/mcp")),
    ] {
        let resource = app.get(path).await.json();
        assert_eq!(resource["authorization_servers"], json!([ISSUER]), "{path}");
        assert_eq!(resource["resource"], named, "{path}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn devidp_signs_the_local_user_in_with_pkce_and_refreshes(pool: PgPool) {
    let app = DevApp::start(pool, env_file()).await;
    let back = redirected(&app.authorize(&[]).await);
    assert_eq!(back["state"], "xyz");
    assert_eq!(back["iss"], ISSUER);
    let answer = app.exchange(&back["code"], VERIFIER).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    let tokens = answer.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "openid email offline_access");
    assert!(tokens["id_token"].is_string());

    // The API trusts the token: it is the seeded local User's.
    let status = assert_ok(
        "identity/status",
        &app.op("identity/status", tokens["access_token"].as_str().unwrap(), json!({})).await,
    );
    assert_eq!(status["auth"]["mode"], "user");
    assert_eq!(status["user"]["email"], devidp::EMAIL);
    assert_eq!(status["user"]["id"], app.seed.user_id);
    assert_eq!(status["workspace"]["id"], app.seed.workspace_id);

    // A code is good once.
    assert_refused(&app.exchange(&back["code"], VERIFIER).await, "invalid_grant");

    // A refresh gives working tokens and retires the refresh token it used.
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let grant = [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "svc-cli")];
    let renewed = app.form("/dev/oidc/token", &grant).await;
    assert_eq!(renewed.status, 200, "{}", renewed.text());
    let renewed = renewed.json();
    assert_ne!(renewed["refresh_token"], tokens["refresh_token"]);
    assert_ok(
        "identity/status",
        &app.op("identity/status", renewed["access_token"].as_str().unwrap(), json!({})).await,
    );
    assert_refused(&app.form("/dev/oidc/token", &grant).await, "invalid_grant");

    // Revocation forgets a refresh token.
    let latest = renewed["refresh_token"].as_str().unwrap();
    let revoked = app.form("/dev/oidc/revoke", &[("token", latest), ("client_id", "svc-cli")]).await;
    assert_eq!(revoked.status, 200);
    let again = [("grant_type", "refresh_token"), ("refresh_token", latest), ("client_id", "svc-cli")];
    assert_refused(&app.form("/dev/oidc/token", &again).await, "invalid_grant");
}

#[sqlx::test(migrations = "../migrations")]
async fn devidp_refuses_what_is_not_loopback_s256_pkce(pool: PgPool) {
    let app = DevApp::start(pool, env_file()).await;
    // Reached through a tunnel (another name in Host), or with no name: refused
    // before anything is granted, on every endpoint.
    for host in [Some("abc.ngrok-free.app"), Some("192.168.1.2:8080"), Some("localhost.evil.example"), None] {
        for (method, path) in [
            ("GET", "/dev/oidc/authorize?response_type=code&client_id=svc-cli"),
            ("POST", "/dev/oidc/token"),
            ("GET", "/dev/oidc/.well-known/openid-configuration"),
        ] {
            let mut request = Request::builder().method(method).uri(path);
            request = match host {
                Some(host) => request.header("host", host),
                None => request,
            };
            let mut request = request.body(Body::empty()).unwrap();
            if host.is_none() {
                // `send` would name 127.0.0.1 for it.
                let response = app.router.clone().oneshot(std::mem::take(&mut request)).await.unwrap();
                assert_eq!(response.status(), 403, "{method} {path} with no Host");
                continue;
            }
            let response = app.send(request).await;
            assert_eq!(response.status, 403, "{method} {path} via {host:?}: {}", response.text());
            assert_eq!(response.json()["error"], "access_denied");
        }
    }
    for host in ["localhost:8080", "[::1]:8080", "127.0.0.1"] {
        let request = Request::get("/dev/oidc/jwks.json").header("host", host).body(Body::empty()).unwrap();
        assert_eq!(app.send(request).await.status, 200, "{host}");
    }
    // Not sent back to a redirect URI that is not on this machine, nor to an unknown client.
    for (name, value) in [
        ("redirect_uri", Some("https://evil.example/callback")),
        ("redirect_uri", Some("http://192.168.1.2:8000/callback")),
        ("redirect_uri", Some("http://127.0.0.1.evil.example/callback")),
        ("redirect_uri", None),
        ("client_id", Some("someone-else")),
    ] {
        let response = app.authorize(&[(name, value)]).await;
        assert_eq!(response.status, 400, "{name}={value:?}: {}", response.text());
        assert!(response.header("location").is_none());
    }
    // Sent back with an error: missing or plain PKCE, another response type.
    for (params, error) in [
        (vec![("code_challenge_method", None)], "invalid_request"),
        (vec![("code_challenge_method", Some("plain")), ("code_challenge", Some(VERIFIER))], "invalid_request"),
        (vec![("code_challenge", None)], "invalid_request"),
        (vec![("code_challenge", Some("too-short"))], "invalid_request"),
        (vec![("response_type", Some("token"))], "unsupported_response_type"),
    ] {
        let back = redirected(&app.authorize(&params).await);
        assert_eq!(back["error"], error, "{params:?}");
        assert_eq!(back["state"], "xyz");
        assert!(!back.contains_key("code"));
    }

    // A wrong verifier is refused, and spends the code.
    let code = app.code().await;
    let other = "a".repeat(43);
    assert_refused(&app.exchange(&code, &other).await, "invalid_grant");
    assert_refused(&app.exchange(&code, VERIFIER).await, "invalid_grant");
    // So do a missing verifier, another redirect URI and another client.
    let code = app.code().await;
    let form =
        [("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", REDIRECT), ("client_id", "svc-cli")];
    assert_refused(&app.form("/dev/oidc/token", &form).await, "invalid_request");
    let code = app.code().await;
    let moved = [
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", "http://127.0.0.1:1/elsewhere"),
        ("client_id", "svc-cli"),
        ("code_verifier", VERIFIER),
    ];
    assert_refused(&app.form("/dev/oidc/token", &moved).await, "invalid_grant");
    assert_refused(&app.exchange(&code, VERIFIER).await, "invalid_grant");
    let stranger = [("grant_type", "client_credentials"), ("client_id", "intruder")];
    assert_refused(&app.form("/dev/oidc/token", &stranger).await, "invalid_client");
    let unsupported = [("grant_type", "password"), ("client_id", "svc-cli")];
    assert_refused(&app.form("/dev/oidc/token", &unsupported).await, "unsupported_grant_type");
}

#[sqlx::test(migrations = "../migrations")]
async fn devidp_seeding_is_idempotent_and_writes_a_private_env_file(pool: PgPool) {
    let file = env_file();
    let first = DevApp::start(pool.clone(), file.clone()).await;
    let first_text = std::fs::read_to_string(&file).unwrap();
    let second = DevApp::start(pool.clone(), file.clone()).await;
    let text = std::fs::read_to_string(&file).unwrap();
    assert_ne!(text, first_text, "a new key and token");

    assert_eq!(second.seed.user_id, first.seed.user_id);
    assert_eq!(second.seed.workspace_id, first.seed.workspace_id);
    assert_ne!(second.seed.api_key_id, first.seed.api_key_id);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let value = |name: &str| {
        let prefix = format!("export {name}='");
        text.lines().find_map(|l| l.strip_prefix(prefix.as_str())).unwrap().trim_end_matches('\'').to_owned()
    };
    assert_eq!(value("SVC_URL"), BASE);
    assert_eq!(value("SVC_WORKSPACE"), second.seed.workspace_id);
    assert!(value("SVC_API_KEY").starts_with(&second.seed.api_key_prefix));

    // One live development key: the earlier start's is revoked.
    let old_key = {
        let prefix = "export SVC_API_KEY='";
        first_text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap().trim_end_matches('\'').to_owned()
    };
    let refused =
        assert_problem(&second.op("identity/status", &old_key, json!({})).await, 401, "authentication_required");
    assert_eq!(refused["error"]["details"]["reason"], "api_key_revoked");
    let status = assert_ok("identity/status", &second.op("identity/status", &value("SVC_API_KEY"), json!({})).await);
    assert_eq!(status["credential"]["scopes"].as_array().unwrap().len(), 9, "operator preset");
    let token = value("SVC_TOKEN");
    let keys = assert_ok("api-keys/list", &second.op("api-keys/list", &token, json!({})).await);
    let live: Vec<&Value> = keys["apiKeys"].as_array().unwrap().iter().filter(|k| k["revokedAt"].is_null()).collect();
    assert_eq!(live.len(), 1, "{keys}");
    // The secret is stored as its SHA-256 only.
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE secret_hash = sha256(convert_to($1, 'UTF8'))")
            .bind(value("SVC_API_KEY"))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, 1);
    let workspaces = assert_ok("workspaces/list", &second.op("workspaces/list", &token, json!({})).await);
    assert_eq!(workspaces["workspaces"].as_array().unwrap().len(), 1, "{workspaces}");
    let _ = std::fs::remove_file(&file);
}

#[sqlx::test(migrations = "../migrations")]
async fn devidp_is_off_without_the_flag_and_refused_off_loopback(pool: PgPool) {
    let app = TestApp::new(pool.clone()).await;
    for path in ["/dev/oidc/.well-known/openid-configuration", "/dev/oidc/jwks.json", "/dev/oidc/authorize"] {
        let response = app.send(Request::get(path).body(Body::empty()).unwrap()).await;
        assert_problem(&response, 404, "resource_not_found");
    }
    let token = Request::post("/dev/oidc/token").header("content-type", "application/x-www-form-urlencoded");
    assert_eq!(app.send(token.body(Body::from("grant_type=refresh_token")).unwrap()).await.status, 404);

    for config in [
        ServeConfig { bind: "0.0.0.0:0".parse().unwrap(), public_base_url: None, ..dev_config(env_file()) },
        ServeConfig { public_base_url: Some("https://svc.example.com".into()), ..dev_config(env_file()) },
    ] {
        let refused = AppState::new(pool.clone(), &config).err().expect("refused").to_string();
        assert!(refused.contains("loopback"), "{refused}");
    }
}
