//! User sessions: OAuth access tokens that are JWTs from the configured OpenID
//! Connect issuer (contract §3).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use svc_contract::{Problem, ProblemCode};

use super::jwks::Jwks;
use time::OffsetDateTime;

use crate::config::OidcConfig;

/// Accepted clock skew for `exp` and `nbf`, in seconds.
const LEEWAY_SECS: u64 = 60;

/// What a valid access token says about its bearer.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedToken {
    pub issuer: String,
    pub subject: String,
    /// Seconds since the epoch; `None` when the token has no `iat`.
    pub issued_at: Option<i64>,
    pub expires_at: i64,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    exp: f64,
    #[serde(default)]
    iat: Option<f64>,
}

/// What a valid ID token says about who signed in.
#[derive(Clone, Debug, PartialEq)]
pub struct IdToken {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub name: Option<String>,
}

#[derive(Deserialize)]
struct IdTokenClaims {
    iss: String,
    sub: String,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

pub struct JwtVerifier {
    jwks: Jwks,
    validation_rs256: Validation,
    validation_es256: Validation,
    verified: VerifiedCache,
}

/// Tokens whose signature and claims were checked, by the SHA-256 of the token.
///
/// Re-checking the signature on every request of a session is wasted work (an
/// RSA verification and a key set-up per call): a token stays good while it has
/// not expired and the key that signed it is still published. So each entry
/// remembers the key set it was checked against, and a change of key set (the
/// provider rotated or retired a key) sends every token through a full check
/// again. Revocation is not decided here: it is read from the database on every
/// request.
struct VerifiedCache {
    entries: Mutex<HashMap<Digest32, (Arc<VerifiedToken>, KeySetGeneration)>>,
}

type Digest32 = [u8; 32];
type KeySetGeneration = u64;

/// Most tokens remembered; when full, expired ones are dropped, then all.
const CACHE_CAPACITY: usize = 10_000;

impl VerifiedCache {
    /// A token checked against key set `generation` that has not expired.
    fn get(&self, digest: &[u8; 32], now: i64, generation: u64) -> Option<Arc<VerifiedToken>> {
        let mut entries = self.entries.lock().ok()?;
        let (token, checked_against) = entries.get(digest)?.clone();
        if checked_against == generation && token.expires_at + LEEWAY_SECS as i64 > now {
            Some(token)
        } else {
            entries.remove(digest);
            None
        }
    }

    fn put(&self, digest: [u8; 32], token: Arc<VerifiedToken>, now: i64, generation: u64) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_CAPACITY {
                entries.retain(|_, (t, _)| t.expires_at + LEEWAY_SECS as i64 > now);
                if entries.len() >= CACHE_CAPACITY {
                    entries.clear();
                }
            }
            entries.insert(digest, (token, generation));
        }
    }
}

fn rejected(reason: &'static str) -> Problem {
    Problem::new(ProblemCode::AuthenticationRequired, "The access token is not valid.").with_detail("reason", reason)
}

impl JwtVerifier {
    pub fn new(config: &OidcConfig) -> Result<Self, String> {
        let validation = |algorithm| {
            let mut v = Validation::new(algorithm);
            v.leeway = LEEWAY_SECS;
            v.validate_nbf = true;
            v.set_issuer(&[config.issuer.as_str()]);
            v.set_audience(&[config.audience.as_str()]);
            v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            v
        };
        Ok(Self {
            jwks: Jwks::new(&config.issuer, &config.jwks)?,
            validation_rs256: validation(Algorithm::RS256),
            validation_es256: validation(Algorithm::ES256),
            verified: VerifiedCache { entries: Mutex::new(HashMap::new()) },
        })
    }

    /// Checks signature, issuer, audience, `exp` and `nbf`. An expired token is
    /// `reauthentication_required`; any other failure `authentication_required`.
    pub async fn verify(&self, token: &str) -> Result<Arc<VerifiedToken>, Problem> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = OffsetDateTime::now_utc().unix_timestamp();
        // Read before checking: a key set replaced meanwhile makes the entry stale.
        let generation = self.jwks.generation();
        if let Some(verified) = self.verified.get(&digest, now, generation) {
            return Ok(verified);
        }
        let verified = Arc::new(self.verify_uncached(token).await?);
        self.verified.put(digest, verified.clone(), now, generation);
        Ok(verified)
    }

    async fn verify_uncached(&self, token: &str) -> Result<VerifiedToken, Problem> {
        let claims: Claims = self.decode(token).await?;
        Ok(VerifiedToken {
            issuer: claims.iss,
            subject: claims.sub,
            issued_at: claims.iat.map(|iat| iat as i64),
            expires_at: claims.exp as i64,
        })
    }

    /// Checks an OpenID Connect ID token exactly as an access token (key,
    /// signature, issuer, audience — here the client id —, `exp`, `nbf`), and
    /// that it carries the `nonce` its sign-in request sent (OIDC Core
    /// §3.1.3.7). Not cached: each is used once.
    pub async fn verify_id_token(&self, token: &str, nonce: &str) -> Result<IdToken, Problem> {
        let claims: IdTokenClaims = self.decode(token).await?;
        let matches = claims.nonce.as_deref().is_some_and(|sent| {
            use subtle::ConstantTimeEq;
            bool::from(sent.as_bytes().ct_eq(nonce.as_bytes()))
        });
        if !matches {
            return Err(rejected("nonce_mismatch"));
        }
        Ok(IdToken { issuer: claims.iss, subject: claims.sub, email: claims.email, name: claims.name })
    }

    async fn decode<C: serde::de::DeserializeOwned>(&self, token: &str) -> Result<C, Problem> {
        if names_critical_extensions(token) {
            return Err(rejected("unsupported_critical_header"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| rejected("malformed_token"))?;
        let validation = match header.alg {
            Algorithm::RS256 => &self.validation_rs256,
            Algorithm::ES256 => &self.validation_es256,
            _ => return Err(rejected("unsupported_algorithm")),
        };
        let key = self.jwks.key_for(header.alg, header.kid.as_deref()).await.ok_or_else(|| rejected("unknown_key"))?;
        let data = jsonwebtoken::decode::<C>(token, &key.key, validation).map_err(|error| match error.kind() {
            ErrorKind::ExpiredSignature => {
                Problem::new(ProblemCode::ReauthenticationRequired, "The session has expired; sign in again.")
                    .with_detail("reason", "token_expired")
            }
            ErrorKind::InvalidSignature => rejected("invalid_signature"),
            ErrorKind::InvalidIssuer => rejected("wrong_issuer"),
            ErrorKind::InvalidAudience => rejected("wrong_audience"),
            ErrorKind::ImmatureSignature => rejected("not_yet_valid"),
            ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) | ErrorKind::Json(_) => {
                rejected("invalid_claims")
            }
            _ => rejected("malformed_token"),
        })?;
        Ok(data.claims)
    }
}

/// Whether the token's header has `crit` (RFC 7515 §4.1.11): it names
/// extensions the recipient must understand, and this server understands none,
/// so such a token is refused. (The JWT library ignores the parameter.)
fn names_critical_extensions(token: &str) -> bool {
    use base64::Engine;
    let header = token.split('.').next().unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|json| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&json).ok())
        .is_some_and(|header| header.contains_key("crit"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use svc_tests::{AUDIENCE, Alg, ISSUER, TestIssuer};

    use super::*;
    use crate::config::JwksSource;

    #[tokio::test]
    async fn tokens_with_critical_extensions_are_refused() {
        let issuer = TestIssuer::shared();
        let config = OidcConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks: JwksSource::File(issuer.jwks_path().to_owned()),
        };
        let verifier = JwtVerifier::new(&config).unwrap();
        let plain = issuer.sign_with_header(Alg::Es256, &json!({}), &TestIssuer::claims("alice"));
        assert_eq!(verifier.verify(&plain).await.unwrap().subject, "alice");
        for crit in [json!(["exp"]), json!(["b64"]), json!([])] {
            let token = issuer.sign_with_header(Alg::Es256, &json!({ "crit": crit }), &TestIssuer::claims("alice"));
            let problem = verifier.verify(&token).await.unwrap_err();
            assert_eq!(problem.details.unwrap()["reason"], "unsupported_critical_header", "{crit}");
        }
    }

    #[tokio::test]
    async fn a_cached_token_is_checked_again_when_its_key_is_retired() {
        let dir = svc_tests::TempDir::new("svc-jwt-cache");
        let path = dir.join("jwks.json");
        let issuer = TestIssuer::shared();
        std::fs::write(&path, issuer.jwks().to_string()).unwrap();
        let config =
            OidcConfig { issuer: ISSUER.into(), audience: AUDIENCE.into(), jwks: JwksSource::File(path.clone()) };
        let mut verifier = JwtVerifier::new(&config).unwrap();
        verifier.jwks = verifier.jwks.with_min_refresh_interval(Duration::ZERO);
        let token = issuer.token("alice");
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice", "from the cache");

        // The provider retires the RSA key; a token naming an unknown key makes
        // us load the new set, and the cached token is then refused.
        let ec_only = json!({ "keys": [issuer.jwks()["keys"][1].clone()] });
        std::fs::write(&path, ec_only.to_string()).unwrap();
        let unknown = "eyJhbGciOiJFUzI1NiIsImtpZCI6Im5ldy0xIn0.e30.c2ln";
        assert_eq!(verifier.verify(unknown).await.unwrap_err().details.unwrap()["reason"], "unknown_key");
        let problem = verifier.verify(&token).await.unwrap_err();
        assert_eq!(problem.details.unwrap()["reason"], "unknown_key");
    }
}
