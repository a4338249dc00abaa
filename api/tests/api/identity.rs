//! identity.status, and how Users authenticate (contract §3, §4).

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::{Alg, TestIssuer, now_secs};

use crate::helpers::{TestApp, assert_ok, assert_problem};
use crate::resource_metadata::CHALLENGE;

#[sqlx::test(migrations = "../migrations")]
async fn a_user_with_one_workspace_has_it_selected(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (user, ws) = app.owner("alice").await;
    let response = app
        .post_raw(
            "identity/status",
            &[
                ("authorization", &format!("Bearer {}", user.token)),
                ("svc-client-version", "0.1.2"),
                ("svc-secret-location", "os_store"),
            ],
            "",
        )
        .await;
    let data = assert_ok("identity/status", &response);
    assert_eq!(data["status"], "ready");
    assert_eq!(data["client"], json!({ "version": "0.1.2", "endpoint": "http://svc.test" }));
    assert_eq!(data["auth"]["mode"], "user");
    assert_eq!(data["auth"]["secretLocation"], "os_store");
    let expires_at = data["auth"]["expiresAt"].as_str().unwrap();
    assert!(expires_at.ends_with('Z') && expires_at.len() == 20, "{expires_at}");
    assert_eq!(data["user"]["email"], "alice@example.test");
    assert_eq!(data["user"]["name"], "alice");
    assert!(data["user"]["id"].as_str().unwrap().starts_with("usr_"));
    assert_eq!(
        data["workspace"],
        json!({ "id": ws, "name": "alice workspace", "slug": "alice-workspace", "role": "owner", "status": "active" })
    );
    assert_eq!(data["credential"], Value::Null);
    assert_eq!(data["availability"], json!({ "api": true, "mcp": true }));
}

#[sqlx::test(migrations = "../migrations")]
async fn client_hints_default_to_unknown(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("bob").await;
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, None, json!({})).await);
    assert_eq!(data["client"]["version"], "unknown");
    assert_eq!(data["auth"]["secretLocation"], "unknown");
    assert_eq!(data["workspace"], Value::Null, "no Workspace yet");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_workspace_is_optional_and_reported_only_when_unambiguous(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("carol").await;
    let first = app.workspace(&user, "First").await;
    app.workspace(&user, "Second").await;
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, None, json!({})).await);
    assert_eq!(data["workspace"], Value::Null, "two Workspaces and no header");
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, Some("first"), json!({})).await);
    assert_eq!(data["workspace"]["id"], first, "selected by slug");
    let data = assert_ok("identity/status", &app.op("identity/status", &user.token, Some(&first), json!({})).await);
    assert_eq!(data["workspace"]["slug"], "first", "selected by id");
    let body = assert_problem(
        &app.op("identity/status", &user.token, Some("nope"), json!({})).await,
        400,
        "workspace_selection_required",
    );
    assert_eq!(body["error"]["details"]["reason"], "unknown_workspace");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_user_who_has_not_finished_setup_gets_setup_required(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let token = app.issuer().token("stranger");
    assert_problem(&app.op("identity/status", &token, None, json!({})).await, 403, "setup_required");
    assert_problem(&app.op("workspaces/create", &token, None, json!({ "name": "x" })).await, 403, "setup_required");
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 0);
}

/// Malformed, badly signed, wrong-audience, wrong-issuer and not-yet-valid
/// tokens are `authentication_required`; expired ones `reauthentication_required`.
#[sqlx::test(migrations = "../migrations")]
async fn bad_tokens_get_stable_codes_and_change_nothing(pool: PgPool) {
    let app = TestApp::new(pool).await;
    app.user("dave").await;
    let issuer = app.issuer();
    let claims = |edit: &dyn Fn(&mut Value)| {
        let mut claims = TestIssuer::claims("dave");
        edit(&mut claims);
        claims
    };
    let body = b64(&TestIssuer::claims("dave").to_string());
    let header_none = format!("{}.{body}.", b64(r#"{"alg":"none","typ":"JWT"}"#));
    // An HMAC token "signed" with the public key: the classic algorithm confusion.
    let header_hs256 = format!("{}.{body}.{}", b64(r#"{"alg":"HS256","typ":"JWT","kid":"rsa-1"}"#), b64("sig"));
    let cases: Vec<(&str, String, u16, &str, &str)> = vec![
        ("garbage", "not-a-jwt".into(), 401, "authentication_required", "malformed_token"),
        ("three garbage parts", "a.b.c".into(), 401, "authentication_required", "malformed_token"),
        ("alg none", header_none, 401, "authentication_required", "malformed_token"),
        ("alg HS256", header_hs256, 401, "authentication_required", "unsupported_algorithm"),
        ("forged signature", issuer.forged("dave"), 401, "authentication_required", "invalid_signature"),
        (
            "wrong audience",
            issuer.sign(Alg::Rs256, &claims(&|c| c["aud"] = "someone-else".into())),
            401,
            "authentication_required",
            "wrong_audience",
        ),
        (
            "wrong issuer",
            issuer.sign(Alg::Rs256, &claims(&|c| c["iss"] = "https://evil.invalid".into())),
            401,
            "authentication_required",
            "wrong_issuer",
        ),
        (
            "future nbf",
            issuer.sign(Alg::Rs256, &claims(&|c| c["nbf"] = (now_secs() + 600).into())),
            401,
            "authentication_required",
            "not_yet_valid",
        ),
        (
            "no subject",
            issuer.sign(
                Alg::Rs256,
                &claims(&|c| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
            ),
            401,
            "authentication_required",
            "invalid_claims",
        ),
        (
            "expired",
            issuer.sign(Alg::Rs256, &claims(&|c| c["exp"] = (now_secs() - 120).into())),
            401,
            "reauthentication_required",
            "token_expired",
        ),
    ];
    for (name, token, status, code, reason) in cases {
        let response = app.op("workspaces/create", &token, None, json!({ "name": "Should not exist" })).await;
        let body = assert_problem(&response, status, code);
        assert_eq!(body["error"]["details"]["reason"], reason, "{name}");
        assert_eq!(response.header("www-authenticate"), Some(CHALLENGE), "{name}");
    }
    assert_eq!(app.count("SELECT count(*) FROM workspaces").await, 0);
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

#[sqlx::test(migrations = "../migrations")]
async fn expiry_has_sixty_seconds_of_leeway_and_es256_is_accepted(pool: PgPool) {
    let app = TestApp::new(pool).await;
    app.user("erin").await;
    let mut claims = TestIssuer::claims("erin");
    claims["exp"] = (now_secs() - 30).into();
    let token = app.issuer().sign(Alg::Rs256, &claims);
    assert_ok("identity/status", &app.op("identity/status", &token, None, json!({})).await);
    let token = app.issuer().sign(Alg::Es256, &TestIssuer::claims("erin"));
    assert_ok("identity/status", &app.op("identity/status", &token, None, json!({})).await);
}

#[sqlx::test(migrations = "../migrations")]
async fn revoked_sessions_need_a_new_sign_in(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let user = app.user("frank").await;
    assert_ok("identity/status", &app.op("identity/status", &user.token, None, json!({})).await);
    // A token issued a second before revocation.
    let mut claims = TestIssuer::claims("frank");
    claims["iat"] = (now_secs() - 1).into();
    let old = app.issuer().sign(Alg::Rs256, &claims);
    svc_core::admin::user_revoke_sessions(&app.pool, svc_tests::ISSUER, "frank").await.unwrap();
    for token in [&user.token, &old] {
        let body =
            assert_problem(&app.op("identity/status", token, None, json!({})).await, 401, "reauthentication_required");
        assert_eq!(body["error"]["details"]["reason"], "session_revoked");
    }
    // Signing in again gives a token issued after the revocation second.
    let mut claims = TestIssuer::claims("frank");
    claims["iat"] = (now_secs() + 2).into();
    let fresh = app.issuer().sign(Alg::Rs256, &claims);
    assert_ok("identity/status", &app.op("identity/status", &fresh, None, json!({})).await);
}
