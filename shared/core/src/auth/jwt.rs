//! User sessions: OAuth access tokens that are JWTs from the configured OpenID
//! Connect issuer (contract §3).

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use svc_contract::{Problem, ProblemCode};

use super::jwks::Jwks;
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

pub struct JwtVerifier {
    jwks: Jwks,
    validation_rs256: Validation,
    validation_es256: Validation,
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
        })
    }

    /// Checks signature, issuer, audience, `exp` and `nbf`. An expired token is
    /// `reauthentication_required`; any other failure `authentication_required`.
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, Problem> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| rejected("malformed_token"))?;
        let validation = match header.alg {
            Algorithm::RS256 => &self.validation_rs256,
            Algorithm::ES256 => &self.validation_es256,
            _ => return Err(rejected("unsupported_algorithm")),
        };
        let key = self.jwks.key_for(header.alg, header.kid.as_deref()).await.ok_or_else(|| rejected("unknown_key"))?;
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, validation).map_err(|error| match error.kind() {
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
        let claims = data.claims;
        Ok(VerifiedToken {
            issuer: claims.iss,
            subject: claims.sub,
            issued_at: claims.iat.map(|iat| iat as i64),
            expires_at: claims.exp as i64,
        })
    }
}
