//! The identity provider's signing keys: loaded from a JWKS file or found through
//! OpenID Connect discovery, cached, and refetched when a token names a key we
//! have not seen (the provider rotated its keys).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use crate::config::JwksSource;

/// Least time between two refetches, so tokens naming unknown keys cannot make
/// us hammer the provider.
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// One key a token may be signed with.
pub struct VerificationKey {
    pub kid: Option<String>,
    pub algorithm: Algorithm,
    pub key: DecodingKey,
}

#[derive(Default)]
struct KeySet {
    keys: Vec<Arc<VerificationKey>>,
}

impl KeySet {
    fn from_jwks(set: &JwkSet) -> Self {
        let keys = set
            .keys
            .iter()
            .filter_map(|jwk| {
                let algorithm = algorithm_of(jwk)?;
                match DecodingKey::from_jwk(jwk) {
                    Ok(key) => Some(Arc::new(VerificationKey { kid: jwk.common.key_id.clone(), algorithm, key })),
                    Err(error) => {
                        tracing::warn!(kid = ?jwk.common.key_id, %error, "skipping unusable JWKS key");
                        None
                    }
                }
            })
            .collect();
        Self { keys }
    }

    /// The key named by `kid`, or without a `kid` the only key for `algorithm`.
    fn find(&self, algorithm: Algorithm, kid: Option<&str>) -> Option<Arc<VerificationKey>> {
        let mut candidates = self.keys.iter().filter(|k| k.algorithm == algorithm);
        match kid {
            Some(kid) => candidates.find(|k| k.kid.as_deref() == Some(kid)).cloned(),
            None => {
                let first = candidates.next()?;
                candidates.next().is_none().then(|| first.clone())
            }
        }
    }
}

/// RS256 and ES256 only (contract §3); other keys are ignored.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let by_parameters = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Algorithm::ES256,
        _ => return None,
    };
    match jwk.common.key_algorithm {
        None => Some(by_parameters),
        Some(KeyAlgorithm::RS256) if by_parameters == Algorithm::RS256 => Some(by_parameters),
        Some(KeyAlgorithm::ES256) if by_parameters == Algorithm::ES256 => Some(by_parameters),
        Some(_) => None,
    }
}

enum Source {
    /// Keys that never change (nothing to refetch).
    Fixed,
    File(PathBuf),
    Discovery {
        issuer: String,
        client: Box<HttpClient>,
    },
}

type HttpClient = crate::https::HttpsClient<Empty<Bytes>>;

/// The cached key set and how to refresh it.
pub struct Jwks {
    source: Source,
    keys: RwLock<Arc<KeySet>>,
    /// Counts the key sets loaded so far.
    generation: AtomicU64,
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
    min_refresh_interval: Duration,
}

impl Jwks {
    /// A file or document source is read now, so a bad one stops start-up;
    /// discovery is fetched on first use, so a briefly unreachable provider does
    /// not.
    pub fn new(issuer: &str, source: &JwksSource) -> Result<Self, String> {
        let (source, keys, last_fetch) = match source {
            JwksSource::Document(text) => (Source::Fixed, parse_jwks(text.as_bytes())?, Some(Instant::now())),
            JwksSource::File(path) => {
                let keys = read_file(path)?;
                (Source::File(path.clone()), keys, Some(Instant::now()))
            }
            JwksSource::Discovery => {
                let client = crate::https::client()?;
                (
                    Source::Discovery { issuer: issuer.trim_end_matches('/').to_owned(), client: Box::new(client) },
                    KeySet::default(),
                    None,
                )
            }
        };
        Ok(Self {
            source,
            keys: RwLock::new(Arc::new(keys)),
            generation: AtomicU64::new(0),
            last_fetch: tokio::sync::Mutex::new(last_fetch),
            min_refresh_interval: MIN_REFRESH_INTERVAL,
        })
    }

    /// Changes the least time between refetches (tests use zero).
    pub fn with_min_refresh_interval(mut self, interval: Duration) -> Self {
        self.min_refresh_interval = interval;
        self
    }

    /// Which key set is in use: it changes every time keys are loaded again.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn current(&self) -> Arc<KeySet> {
        self.keys.read().map(|k| k.clone()).unwrap_or_default()
    }

    /// The key a token names, refetching once if it is unknown.
    pub async fn key_for(&self, algorithm: Algorithm, kid: Option<&str>) -> Option<Arc<VerificationKey>> {
        if let Some(key) = self.current().find(algorithm, kid) {
            return Some(key);
        }
        self.refresh().await;
        self.current().find(algorithm, kid)
    }

    async fn refresh(&self) {
        if matches!(self.source, Source::Fixed) {
            return;
        }
        let mut last_fetch = self.last_fetch.lock().await;
        if last_fetch.is_some_and(|at| at.elapsed() < self.min_refresh_interval) {
            return;
        }
        *last_fetch = Some(Instant::now());
        let fetched = match &self.source {
            Source::Fixed => return,
            Source::File(path) => read_file(path),
            Source::Discovery { issuer, client } => discover(client, issuer).await,
        };
        match fetched {
            Ok(keys) => {
                if let Ok(mut current) = self.keys.write() {
                    *current = Arc::new(keys);
                    self.generation.fetch_add(1, Ordering::AcqRel);
                }
            }
            Err(error) => tracing::warn!(%error, "could not refresh the identity provider's keys"),
        }
    }
}

fn parse_jwks(text: &[u8]) -> Result<KeySet, String> {
    let set: JwkSet = serde_json::from_slice(text).map_err(|e| format!("not a JWKS document: {e}"))?;
    Ok(KeySet::from_jwks(&set))
}

fn read_file(path: &PathBuf) -> Result<KeySet, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read JWKS file {}: {e}", path.display()))?;
    parse_jwks(&text)
}

async fn discover(client: &HttpClient, issuer: &str) -> Result<KeySet, String> {
    let configuration: Value =
        serde_json::from_slice(&get(client, &format!("{issuer}/.well-known/openid-configuration")).await?)
            .map_err(|e| format!("bad OpenID configuration: {e}"))?;
    let jwks_uri =
        configuration.get("jwks_uri").and_then(Value::as_str).ok_or("the OpenID configuration has no jwks_uri")?;
    parse_jwks(&get(client, jwks_uri).await?)
}

async fn get(client: &HttpClient, url: &str) -> Result<Bytes, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("bad URL {url}: {e}"))?;
    let fetch = async {
        let response = client.get(uri).await.map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES);
        body.collect().await.map(|b| b.to_bytes()).map_err(|e| format!("GET {url}: {e}"))
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetch).await.map_err(|_| format!("GET {url}: timed out"))?
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jsonwebtoken::Algorithm;
    use serde_json::json;
    use svc_tests::TestIssuer;

    use super::*;

    fn write(path: &std::path::Path, keys: &[Value]) {
        std::fs::write(path, json!({ "keys": keys }).to_string()).unwrap();
    }

    #[tokio::test]
    async fn an_unknown_kid_refetches_at_most_once_per_interval() {
        let dir = svc_tests::TempDir::new("svc-jwks");
        let path = dir.join("jwks.json");
        let published = TestIssuer::shared().jwks();
        let (rsa, ec) = (published["keys"][0].clone(), published["keys"][1].clone());
        write(&path, std::slice::from_ref(&ec));
        let source = JwksSource::File(path.clone());

        // The provider rotates in an RSA key: a token naming it triggers a refetch.
        let jwks = Jwks::new("iss", &source).unwrap().with_min_refresh_interval(Duration::ZERO);
        assert!(jwks.key_for(Algorithm::ES256, Some("ec-1")).await.is_some());
        assert!(jwks.key_for(Algorithm::RS256, Some("rsa-1")).await.is_none());
        write(&path, &[ec.clone(), rsa.clone()]);
        assert!(jwks.key_for(Algorithm::RS256, Some("rsa-1")).await.is_some());

        // With the default interval, a just-read set is not read again.
        write(&path, std::slice::from_ref(&ec));
        let jwks = Jwks::new("iss", &source).unwrap();
        write(&path, &[ec, rsa]);
        assert!(jwks.key_for(Algorithm::RS256, Some("rsa-1")).await.is_none(), "rate-limited");
        // Keys of other algorithms, or an ambiguous missing kid, are not used.
        assert!(jwks.key_for(Algorithm::RS256, Some("ec-1")).await.is_none());
    }

    #[test]
    fn a_bad_file_fails_at_start() {
        let dir = svc_tests::TempDir::new("svc-jwks-bad");
        let path = dir.join("jwks.json");
        std::fs::write(&path, "not json").unwrap();
        assert!(Jwks::new("iss", &JwksSource::File(path.clone())).is_err());
        assert!(Jwks::new("iss", &JwksSource::File(path.with_extension("missing"))).is_err());
    }
}
