//! A stand-in identity provider for local use: keeps an ES256 key in a folder
//! (default `.dev/`), writes its public JWKS there, and prints an access token.
//!
//! ```text
//! cargo run -q -p svc-tests --bin svc-dev-token -- --subject alice [--dir .dev] [--hours 8]
//! ```
//! Run the API with `SVC_OIDC_ISSUER=https://issuer.test.svc.invalid`,
//! `SVC_OIDC_AUDIENCE=svc-api` and `SVC_OIDC_JWKS_FILE=.dev/jwks.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;
use svc_tests::{AUDIENCE, ISSUER, now_secs};

fn main() -> ExitCode {
    match run() {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("svc-dev-token: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<String, String> {
    let mut dir = PathBuf::from(".dev");
    let mut subject = None;
    let mut hours: i64 = 8;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or(format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--dir" => dir = value.into(),
            "--subject" => subject = Some(value),
            "--hours" => hours = value.parse().map_err(|_| "--hours takes a whole number")?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    let subject = subject.ok_or("--subject is required")?;
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let key_path = dir.join("signing-key.p8");
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let key = match std::fs::read(&key_path) {
        Ok(der) => {
            EcdsaKeyPair::from_pkcs8(alg, &der).map_err(|e| format!("bad key in {}: {e}", key_path.display()))?
        }
        Err(_) => {
            let key = EcdsaKeyPair::generate(alg).map_err(|e| e.to_string())?;
            let der = key.to_pkcs8v1().map_err(|e| e.to_string())?;
            std::fs::write(&key_path, der.as_ref()).map_err(|e| e.to_string())?;
            key
        }
    };
    let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    let point = key.public_key().as_ref();
    let jwks = json!({ "keys": [{ "kty": "EC", "crv": "P-256", "kid": "dev-1", "alg": "ES256", "use": "sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..65]) }] });
    std::fs::write(dir.join("jwks.json"), jwks.to_string()).map_err(|e| e.to_string())?;
    let now = now_secs();
    let claims =
        json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "nbf": now, "exp": now + hours * 3600 });
    let header = json!({ "alg": "ES256", "typ": "JWT", "kid": "dev-1" });
    let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let signature = key.sign(&SystemRandom::new(), input.as_bytes()).map_err(|e| e.to_string())?;
    Ok(format!("{input}.{}", b64(signature.as_ref())))
}
