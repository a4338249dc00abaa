//! Test support shared by the API tests and the end-to-end tests.
//!
//! [`TestIssuer`] plays the identity provider: it holds freshly generated RS256
//! and ES256 keys, publishes them as a JWKS file, and signs access tokens. It
//! signs with aws-lc-rs directly rather than with the JWT library the service
//! verifies with, so the two sides are independent implementations.

pub mod cleanup;
pub mod commands;
pub mod http;
pub mod knowledge;
pub mod llm;
pub mod process;
pub mod provider;
pub mod proxy;
pub mod raw;
pub mod stack;
mod temp;

pub use temp::TempDir;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

pub const ISSUER: &str = "https://issuer.test.svc.invalid";

/// The embedding model as `scripts/fetch-model` leaves it in the project:
/// every binary a test starts is given it (their default is relative to
/// where they start).
pub fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/potion-base-8M")
}
pub const AUDIENCE: &str = "svc-api";

/// A signing algorithm of access tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Es256,
}

pub struct TestIssuer {
    rsa: RsaKeyPair,
    ec: EcdsaKeyPair,
    /// A key the service does not know (for "bad signature" tokens).
    stranger: EcdsaKeyPair,
    jwks_path: PathBuf,
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default()
}

fn ec_key() -> EcdsaKeyPair {
    EcdsaKeyPair::generate(&signature::ECDSA_P256_SHA256_FIXED_SIGNING).expect("generate a P-256 key")
}

/// The issuer's signing keys, PKCS#8. Test keys, made for these tests and
/// committed with them, so that the JWKS the API reads is a committed file too
/// and no test process leaves a key folder behind.
const RSA_KEY: &[u8] = include_bytes!("../keys/rsa-1.pk8");
const EC_KEY: &[u8] = include_bytes!("../keys/ec-1.pk8");

impl TestIssuer {
    /// The process-wide issuer, whose JWKS is `tests/keys/jwks.json`.
    pub fn shared() -> &'static TestIssuer {
        static ISSUER: OnceLock<TestIssuer> = OnceLock::new();
        ISSUER.get_or_init(|| Self {
            rsa: RsaKeyPair::from_pkcs8(RSA_KEY).expect("the committed RSA test key"),
            ec: EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, EC_KEY)
                .expect("the committed EC test key"),
            stranger: ec_key(),
            jwks_path: Path::new(env!("CARGO_MANIFEST_DIR")).join("keys").join("jwks.json"),
        })
    }

    pub fn jwks_path(&self) -> &Path {
        &self.jwks_path
    }

    /// The public keys, as the provider would publish them.
    pub fn jwks(&self) -> Value {
        let rsa = self.rsa.public_key();
        let point = self.ec.public_key().as_ref();
        json!({ "keys": [
            { "kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig",
              "n": b64(rsa.modulus().big_endian_without_leading_zero()),
              "e": b64(rsa.exponent().big_endian_without_leading_zero()) },
            { "kty": "EC", "kid": "ec-1", "alg": "ES256", "use": "sig", "crv": "P-256",
              "x": b64(&point[1..33]), "y": b64(&point[33..65]) }
        ]})
    }

    /// Claims of a valid one-hour access token for `subject`.
    pub fn claims(subject: &str) -> Value {
        let now = now_secs();
        json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "nbf": now, "exp": now + 3600 })
    }

    /// A valid RS256 access token for `subject`.
    pub fn token(&self, subject: &str) -> String {
        self.sign(Alg::Rs256, &Self::claims(subject))
    }

    /// Signs any claims with one of the published keys.
    pub fn sign(&self, alg: Alg, claims: &Value) -> String {
        self.sign_with_header(alg, &json!({}), claims)
    }

    /// Signs claims with a header of `alg`, `typ`, `kid` and the `extra` members.
    pub fn sign_with_header(&self, alg: Alg, extra: &Value, claims: &Value) -> String {
        let (name, kid) = match alg {
            Alg::Rs256 => ("RS256", "rsa-1"),
            Alg::Es256 => ("ES256", "ec-1"),
        };
        let mut header = json!({ "alg": name, "typ": "JWT", "kid": kid });
        if let (Some(header), Some(extra)) = (header.as_object_mut(), extra.as_object()) {
            header.extend(extra.clone());
        }
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature = match alg {
            Alg::Rs256 => {
                let mut sig = vec![0; self.rsa.public_modulus_len()];
                self.rsa
                    .sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut sig)
                    .expect("RSA signing");
                sig
            }
            Alg::Es256 => {
                self.ec.sign(&SystemRandom::new(), input.as_bytes()).expect("ECDSA signing").as_ref().to_vec()
            }
        };
        format!("{input}.{}", b64(signature))
    }

    /// A token that names the published EC key but is signed by another key.
    pub fn forged(&self, subject: &str) -> String {
        let input = format!(
            "{}.{}",
            b64(json!({ "alg": "ES256", "typ": "JWT", "kid": "ec-1" }).to_string()),
            b64(Self::claims(subject).to_string())
        );
        let sig = self.stranger.sign(&SystemRandom::new(), input.as_bytes()).expect("ECDSA signing");
        format!("{input}.{}", b64(sig.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tests/keys/jwks.json` publishes the committed keys
    /// (`SVC_UPDATE_KEYS=1` rewrites it after a key changes).
    #[test]
    fn the_committed_jwks_matches_the_keys() {
        let issuer = TestIssuer::shared();
        let expected = serde_json::to_string_pretty(&issuer.jwks()).expect("JSON") + "\n";
        if std::env::var_os("SVC_UPDATE_KEYS").is_some() {
            std::fs::write(issuer.jwks_path(), &expected).expect("write the JWKS");
        }
        let committed = std::fs::read_to_string(issuer.jwks_path()).expect("the committed JWKS");
        assert_eq!(committed, expected);
    }
}
