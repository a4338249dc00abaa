//! The development issuer's signing key: a P-256 key made at start and never
//! written anywhere, so a restart retires every token it signed.

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

pub fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Signs JWTs with ES256 (contract §3 accepts RS256 and ES256).
pub struct Signer {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    kid: String,
    jwks: Value,
}

impl Signer {
    pub fn generate() -> anyhow::Result<Self> {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .map_err(|_| anyhow::anyhow!("could not generate the development issuer's signing key"))?;
        // An uncompressed P-256 point: 0x04, then x and y of 32 bytes each.
        let point = key.public_key().as_ref();
        let (x, y) = match (point.len(), point.get(1..33), point.get(33..65)) {
            (65, Some(x), Some(y)) => (b64(x), b64(y)),
            _ => anyhow::bail!("unexpected public key encoding"),
        };
        // The RFC 7638 thumbprint: members in lexicographic order, no spaces.
        let thumbprint = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let kid = b64(digest(&SHA256, thumbprint.as_bytes()));
        let jwks = json!({ "keys": [{
            "kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": kid, "alg": "ES256", "use": "sig",
        }] });
        Ok(Self { key, rng: SystemRandom::new(), kid, jwks })
    }

    /// The public key as a JWKS document.
    pub fn jwks(&self) -> &Value {
        &self.jwks
    }

    /// A compact JWS of `claims` with header type `typ` (`at+jwt`, `JWT`).
    pub fn sign(&self, typ: &str, claims: &Value) -> anyhow::Result<String> {
        let header = json!({ "alg": "ES256", "typ": typ, "kid": self.kid });
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature =
            self.key.sign(&self.rng, input.as_bytes()).map_err(|_| anyhow::anyhow!("could not sign a token"))?;
        Ok(format!("{input}.{}", b64(signature.as_ref())))
    }
}

impl Signer {
    /// The claims of a compact JWS this key signed, if its signature holds
    /// (what the token says is for the caller to check).
    pub fn verified_claims(&self, token: &str) -> Option<Value> {
        let (input, signature) = token.rsplit_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref());
        public.verify(input.as_bytes(), &signature).ok()?;
        let (_, claims) = input.split_once('.')?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).ok()?).ok()
    }
}

/// `bytes` random bytes from the OS CSPRNG, base64url without padding.
pub fn random_token(bytes: usize) -> anyhow::Result<String> {
    let mut buffer = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut buffer).map_err(|_| anyhow::anyhow!("no randomness available"))?;
    Ok(b64(buffer))
}

/// The S256 PKCE challenge of `verifier` (RFC 7636 §4.2).
pub fn s256(verifier: &str) -> String {
    b64(digest(&SHA256, verifier.as_bytes()))
}
