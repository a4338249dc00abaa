//! The web application's side of OpenID Connect sign-in (Authorization Code
//! with S256 PKCE, `state` and `nonce`): the provider's endpoints from
//! discovery, the code exchange, the ID token checked by the same JWKS and
//! JWT code as API access tokens, and the UserInfo endpoint for what the ID
//! token leaves out (OpenID Connect Core §5.3: many providers give `email`
//! only there in the code flow).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use url::Url;

use super::jwt::{IdToken, JwtVerifier};
use crate::config::{JwksSource, OidcConfig};

const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The web application as an OpenID Connect client.
#[derive(Clone, Debug)]
pub struct RelyingPartyConfig {
    pub issuer: String,
    pub client_id: String,
    /// For a provider that wants a confidential client (`client_secret_basic`).
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    /// Where the provider's keys come from (the same source as for API tokens).
    pub jwks: JwksSource,
}

#[derive(Clone, Debug, Deserialize)]
struct Endpoints {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    #[serde(default)]
    userinfo_endpoint: Option<String>,
}

type HttpClient = crate::https::HttpsClient<Full<Bytes>>;

pub struct RelyingParty {
    config: RelyingPartyConfig,
    client: HttpClient,
    /// Found once, on first use, so a provider briefly down at start-up does
    /// not stop the API.
    endpoints: tokio::sync::OnceCell<Endpoints>,
    id_tokens: JwtVerifier,
}

/// What the web application reads of a UserInfo answer.
#[derive(Deserialize)]
struct UserInfo {
    sub: String,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// A sign-in's secrets: `state` and `nonce` travel through the browser, the
/// PKCE verifier never leaves the server.
pub struct Challenge {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
}

impl Challenge {
    pub fn new() -> Result<Self, getrandom::Error> {
        Ok(Self { state: random_token()?, nonce: random_token()?, verifier: random_token()? })
    }
}

/// 32 random bytes from the OS CSPRNG, base64url (43 characters: also a valid
/// PKCE verifier, RFC 7636 §4.1).
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// SHA-256 of a token: what is stored of it.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl RelyingParty {
    pub fn new(config: RelyingPartyConfig) -> Result<Self, String> {
        let oidc =
            OidcConfig { issuer: config.issuer.clone(), audience: config.client_id.clone(), jwks: config.jwks.clone() };
        Ok(Self {
            id_tokens: JwtVerifier::new(&oidc)?,
            client: crate::https::client()?,
            endpoints: tokio::sync::OnceCell::new(),
            config,
        })
    }

    pub fn redirect_uri(&self) -> &str {
        &self.config.redirect_uri
    }

    async fn endpoints(&self) -> Result<&Endpoints, String> {
        self.endpoints
            .get_or_try_init(|| async {
                let issuer = self.config.issuer.trim_end_matches('/');
                let url = format!("{issuer}/.well-known/openid-configuration");
                let body = self.send(hyper::Request::get(url.as_str()), Bytes::new(), &url).await?;
                let endpoints: Endpoints =
                    serde_json::from_slice(&body).map_err(|e| format!("bad OpenID configuration: {e}"))?;
                if endpoints.issuer.trim_end_matches('/') != issuer {
                    return Err(format!("the OpenID configuration names another issuer: {}", endpoints.issuer));
                }
                Ok(endpoints)
            })
            .await
    }

    /// Where to send the browser to sign in.
    /// `login_hint` (OIDC Core §3.1.2.1) tells the provider whom to sign in.
    pub async fn authorization_url(&self, challenge: &Challenge, login_hint: Option<&str>) -> Result<String, String> {
        let endpoints = self.endpoints().await?;
        let mut url =
            Url::parse(&endpoints.authorization_endpoint).map_err(|e| format!("bad authorization endpoint: {e}"))?;
        let code_challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(challenge.verifier.as_bytes()));
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &self.config.redirect_uri)
            .append_pair("scope", &self.config.scopes.join(" "))
            .append_pair("state", &challenge.state)
            .append_pair("nonce", &challenge.nonce)
            .append_pair("code_challenge", &code_challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(hint) = login_hint {
            url.query_pairs_mut().append_pair("login_hint", hint);
        }
        Ok(url.into())
    }

    /// Exchanges the code for tokens and returns the checked ID token, its
    /// `email` (and `name`) taken from the UserInfo endpoint when the ID
    /// token has none. The error text names what failed, never a token.
    pub async fn exchange(&self, code: &str, verifier: &str, nonce: &str) -> Result<IdToken, String> {
        let endpoints = self.endpoints().await?;
        // The serializer is not Send: the body is finished before any await.
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", &self.config.redirect_uri)
                .append_pair("code_verifier", verifier);
            if self.config.client_secret.is_none() {
                form.append_pair("client_id", &self.config.client_id);
            }
            form.finish()
        };
        let mut request = hyper::Request::post(endpoints.token_endpoint.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(hyper::header::ACCEPT, "application/json");
        // RFC 6749 §2.3.1: both parts form-encoded before Basic.
        if let Some(secret) = &self.config.client_secret {
            let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let basic = STANDARD.encode(format!("{}:{}", encode(&self.config.client_id), encode(secret)));
            request = request.header(hyper::header::AUTHORIZATION, format!("Basic {basic}"));
        }
        let body = self.send(request, Bytes::from(form), &endpoints.token_endpoint).await?;
        #[derive(Deserialize)]
        struct Tokens {
            id_token: Option<String>,
            access_token: Option<String>,
        }
        let tokens: Tokens = serde_json::from_slice(&body).map_err(|_| "the token answer is not JSON".to_owned())?;
        let id_token = tokens.id_token.ok_or("the token answer has no id_token")?;
        let mut identity = self.id_tokens.verify_id_token(&id_token, nonce).await.map_err(|problem| {
            let reason = problem.details.as_ref().and_then(|d| d.get("reason")).and_then(|r| r.as_str());
            format!("the ID token was refused ({})", reason.unwrap_or("invalid"))
        })?;
        if identity.email.as_deref().is_none_or(str::is_empty)
            && let (Some(url), Some(access_token)) = (&endpoints.userinfo_endpoint, &tokens.access_token)
        {
            let claims = self.user_info(url, access_token).await?;
            // OpenID Connect Core §5.3.2: claims of another subject are not this User's.
            if claims.sub != identity.subject {
                return Err("the UserInfo answer names another subject".into());
            }
            identity.email = claims.email.filter(|e| !e.is_empty());
            identity.name = identity.name.or(claims.name);
        }
        Ok(identity)
    }

    /// The UserInfo endpoint's claims for the access token just issued.
    async fn user_info(&self, url: &str, access_token: &str) -> Result<UserInfo, String> {
        let request = hyper::Request::get(url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {access_token}"))
            .header(hyper::header::ACCEPT, "application/json");
        let body = self.send(request, Bytes::new(), url).await?;
        serde_json::from_slice(&body).map_err(|_| format!("{url}: the UserInfo answer is not a JSON object of claims"))
    }

    async fn send(&self, request: http::request::Builder, body: Bytes, url: &str) -> Result<Bytes, String> {
        let request = request.body(Full::new(body)).map_err(|e| format!("bad request to {url}: {e}"))?;
        let fetch = async {
            let response = self.client.request(request).await.map_err(|e| format!("{url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("{url}: HTTP {}", response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES);
            body.collect().await.map(|b| b.to_bytes()).map_err(|e| format!("{url}: {e}"))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch).await.map_err(|_| format!("{url}: timed out"))?
    }
}
