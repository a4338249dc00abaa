//! A development identity provider built into the API (`svc-api serve --dev-idp`).
//!
//! An OpenID Connect issuer at `{base_url}/dev/oidc` that signs in one local User
//! without a password, so the whole product (the API, MCP, `svc auth login`) runs
//! on one machine with no outside provider: Authorization Code with S256 PKCE
//! only, loopback redirect URIs only, one-time codes, rotating refresh tokens,
//! and ES256 JWT access tokens for the API's audience. The API trusts its key
//! in-process ([`JwksSource::Document`]). Anyone who can reach it is signed in,
//! so it refuses to start unless the API listens, and is addressed, on loopback.

mod oauth;
mod seed;
mod signer;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use svc_core::{JwksSource, OidcConfig};
use url::{Host, Url};

pub use seed::{DevSeed, prepare};

use crate::config::ServeConfig;
use signer::{Signer, random_token};

/// The local User's subject at the development issuer.
pub const SUBJECT: &str = "local-developer";
pub const EMAIL: &str = "developer@svc.localhost";
pub const NAME: &str = "Local Developer";
/// Where the issuer lives under the base URL.
pub const PATH: &str = "/dev/oidc";
/// A `login_hint` starting so signs in a new local User of that subject (the
/// web application's "new User" sign-in, to show first-time setup locally).
pub const NEW_USER_PREFIX: &str = "dev-user-";
/// New local Users whose subject starts so have no e-mail address at the
/// issuer (setup then asks for one, as with a provider that gives none).
pub const WITHOUT_EMAIL_PREFIX: &str = "dev-user-noemail-";
/// The scopes the issuer knows; others asked for are left out of the grant.
pub const SCOPES: [&str; 4] = ["openid", "profile", "email", "offline_access"];

/// The issuer: its identity, key and outstanding grants.
pub struct DevIdp {
    issuer: String,
    audience: String,
    client_id: String,
    signer: Signer,
    grants: oauth::Grants,
}

impl DevIdp {
    /// Makes the issuer with a fresh key, after [`check`]ing the configuration.
    pub fn new(config: &ServeConfig) -> anyhow::Result<Self> {
        check(config)?;
        Ok(Self {
            issuer: config.dev_issuer(),
            audience: config.dev_audience(),
            client_id: config.client_id().unwrap_or_else(|| crate::config::DEFAULT_DEV_CLIENT_ID.to_owned()),
            signer: Signer::generate()?,
            grants: oauth::Grants::default(),
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// What the API's token verification trusts: this issuer and its key.
    pub fn trust(&self) -> OidcConfig {
        OidcConfig {
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            jwks: JwksSource::Document(self.signer.jwks().to_string()),
        }
    }

    /// An access token of the local User for the API (RFC 9068 shape) and when
    /// it expires, in seconds since the epoch.
    pub fn access_token(&self, scope: &str, lifetime: Duration) -> anyhow::Result<(String, u64)> {
        self.access_token_of(SUBJECT, scope, lifetime)
    }

    /// An access token of `subject` (the local User, or a new one the web
    /// application asked for with `login_hint`).
    fn access_token_of(&self, subject: &str, scope: &str, lifetime: Duration) -> anyhow::Result<(String, u64)> {
        let now = now_secs();
        let expires_at = now + lifetime.as_secs();
        let claims = json!({
            "iss": self.issuer,
            "sub": subject,
            "aud": self.audience,
            "client_id": self.client_id,
            "scope": scope,
            "iat": now,
            "exp": expires_at,
            "jti": random_token(16)?,
        });
        Ok((self.signer.sign("at+jwt", &claims)?, expires_at))
    }

    /// An OpenID Connect ID token of the local User for the client. Like many
    /// providers in the code flow, it names the User and leaves the e-mail
    /// address to the UserInfo endpoint ([`Self::user_info`]).
    fn id_token(&self, subject: &str, nonce: Option<&str>, lifetime: Duration) -> anyhow::Result<String> {
        let now = now_secs();
        let mut claims = json!({
            "iss": self.issuer,
            "sub": subject,
            "aud": self.client_id,
            "iat": now,
            "auth_time": now,
            "exp": now + lifetime.as_secs(),
            "name": if subject == SUBJECT { NAME } else { "" },
        });
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        self.signer.sign("JWT", &claims)
    }

    /// The UserInfo claims (OpenID Connect Core §5.3) of the User an access
    /// token of this issuer names, if it is one and has not expired.
    fn user_info(&self, access_token: &str) -> Option<Value> {
        let claims = self.signer.verified_claims(access_token)?;
        let live = claims["exp"].as_u64().is_some_and(|exp| exp > now_secs());
        if !live || claims["iss"] != self.issuer.as_str() || claims["aud"] != self.audience.as_str() {
            return None;
        }
        let subject = claims["sub"].as_str()?;
        let mut info = json!({ "sub": subject, "name": if subject == SUBJECT { NAME } else { "" } });
        if subject == SUBJECT {
            info["email"] = EMAIL.into();
        } else if !subject.starts_with(WITHOUT_EMAIL_PREFIX) {
            info["email"] = format!("{subject}@svc.localhost").into();
        }
        if info.get("email").is_some() {
            info["email_verified"] = true.into();
        }
        Some(info)
    }

    /// The OpenID Connect discovery document.
    fn discovery(&self) -> Value {
        let issuer = &self.issuer;
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "userinfo_endpoint": format!("{issuer}/userinfo"),
            "revocation_endpoint": format!("{issuer}/revoke"),
            "jwks_uri": format!("{issuer}/jwks.json"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "scopes_supported": SCOPES,
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "email", "email_verified", "name"],
            "authorization_response_iss_parameter_supported": true,
        })
    }
}

/// The issuer's endpoints, to be merged into the API's router.
pub fn routes<S: Clone + Send + Sync + 'static>(idp: Arc<DevIdp>) -> Router<S> {
    Router::new()
        .route(&format!("{PATH}/.well-known/openid-configuration"), get(oauth::discovery))
        .route(&format!("{PATH}/jwks.json"), get(oauth::jwks))
        .route(&format!("{PATH}/authorize"), get(oauth::authorize))
        .route(&format!("{PATH}/token"), post(oauth::token))
        .route(&format!("{PATH}/revoke"), post(oauth::revoke))
        .route(&format!("{PATH}/userinfo"), get(oauth::user_info))
        .route_layer(middleware::from_fn(loopback_host))
        .with_state(idp)
}

/// Answers only requests addressed to this machine by name (`Host`): a tunnel
/// or port forward (ngrok, `ssh -R`, an editor's forwarding) reaches a
/// loopback listener from anywhere, but carries the outside name.
async fn loopback_host(request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok());
    let local = host.and_then(|h| Url::parse(&format!("http://{h}/")).ok()).is_some_and(|url| is_loopback(&url));
    if !local {
        let body = json!({
            "error": "access_denied",
            "error_description": "The development identity provider answers only requests addressed to 127.0.0.1, [::1] or localhost."
        });
        return (StatusCode::FORBIDDEN, Json(body)).into_response();
    }
    next.run(request).await
}

/// Refuses a configuration in which another machine could reach the issuer
/// (it signs in whoever asks), or in which it would compete with a real one.
pub fn check(config: &ServeConfig) -> anyhow::Result<()> {
    if !config.bind.ip().is_loopback() {
        anyhow::bail!(
            "--dev-idp signs anyone in without a password, so it runs only on a loopback address; \
             SVC_BIND is {} (use 127.0.0.1:PORT)",
            config.bind
        );
    }
    let base = config.public_base_url();
    if !Url::parse(&base).is_ok_and(|url| is_loopback(&url)) {
        anyhow::bail!(
            "--dev-idp runs only behind a loopback base URL; SVC_PUBLIC_BASE_URL is {base} \
             (unset it, or use http://127.0.0.1:PORT)"
        );
    }
    if config.oidc_issuer.is_some() {
        anyhow::bail!("--dev-idp is an issuer of its own: unset SVC_OIDC_ISSUER, or drop --dev-idp");
    }
    Ok(())
}

/// Whether `url` is an `http`/`https` address on this machine: a loopback IP
/// address or `localhost` (RFC 8252 §7.3, RFC 6761 §6.3).
pub fn is_loopback(url: &Url) -> bool {
    let local = match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    local && matches!(url.scheme(), "http" | "https")
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for good in ["http://127.0.0.1:8080/cb", "http://[::1]:1/", "http://localhost/callback", "http://127.1.2.3/"] {
            assert!(is_loopback(&Url::parse(good).unwrap()), "{good}");
        }
        for bad in [
            "http://example.com/cb",
            "http://10.0.0.1/",
            "http://0.0.0.0:8080/",
            "http://[::]:1/",
            "http://localhost.example.com/",
            "ftp://127.0.0.1/",
            "http://127.0.0.1.nip.io/",
        ] {
            assert!(!is_loopback(&Url::parse(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn a_non_loopback_configuration_is_refused() {
        let config = |bind: &str, base: Option<&str>, issuer: Option<&str>| ServeConfig {
            bind: bind.parse().unwrap(),
            public_base_url: base.map(str::to_owned),
            oidc_issuer: issuer.map(str::to_owned),
            dev_idp: true,
            ..ServeConfig::default()
        };
        assert!(check(&config("127.0.0.1:0", None, None)).is_ok());
        assert!(check(&config("[::1]:8080", Some("http://localhost:8080"), None)).is_ok());
        let refused = check(&config("0.0.0.0:8080", None, None)).unwrap_err().to_string();
        assert!(refused.contains("SVC_BIND is 0.0.0.0:8080"), "{refused}");
        assert!(check(&config("127.0.0.1:8080", Some("https://svc.example.com"), None)).is_err());
        assert!(check(&config("127.0.0.1:8080", None, Some("https://issuer.example"))).is_err());
    }
}
