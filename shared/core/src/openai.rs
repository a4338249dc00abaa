//! An OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, text-embeddings-
//! inference, ...): where the answer model (`SVC_LLM_*`) and the embeddings
//! model (`SVC_EMBEDDINGS_*`) are reached. One JSON POST, two attempts at
//! most: a timeout, a transport failure, a 429 or a 5xx is tried once more;
//! any other refusal is not.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

use crate::https::HttpsClient;

/// Where the model is.
#[derive(Clone)]
pub struct EndpointConfig {
    /// Up to `/v1` (or wherever the endpoint's paths live), without a trailing slash.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token; never logged.
    pub api_key: Option<String>,
    /// Longest wait for one attempt.
    pub timeout: Duration,
}

impl std::fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

pub struct Endpoint {
    config: EndpointConfig,
    client: HttpsClient<Full<Bytes>>,
}

/// Why a call failed, and whether another may succeed: `retry` when the
/// endpoint itself failed (unreachable, too slow, overloaded), not when it
/// refused what it was sent or answered what `read` refuses; `status` when it
/// answered with one.
pub struct Failed {
    pub retry: bool,
    pub status: Option<u16>,
    pub reason: String,
}

impl Failed {
    /// The endpoint cannot serve anyone as configured: down, too slow,
    /// overloaded, or refusing its key or its path (401, 403, 404).
    pub fn of_the_endpoint(&self) -> bool {
        self.retry || matches!(self.status, Some(401 | 403 | 404))
    }
}

/// The most a reply may hold: a batch of embeddings of the most dimensions
/// taken (`svc_search::EMBED_BATCH` × 4,096 numbers, each written out at full
/// precision and indented) with room to spare.
pub const MAX_REPLY: usize = 64 << 20;

impl Endpoint {
    pub fn new(mut config: EndpointConfig) -> Result<Self, String> {
        while config.base_url.ends_with('/') {
            config.base_url.pop();
        }
        Ok(Self { config, client: crate::https::client()? })
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// POSTs `body` to `{base_url}/{path}` and returns the JSON reply that
    /// `read` accepts (`read` says what is missing otherwise). The reason of
    /// a failure is logged for the operator and returned; it is never the
    /// caller's to read.
    pub async fn post<T>(
        &self,
        path: &str,
        body: &Value,
        read: impl Fn(Value) -> Result<T, String>,
    ) -> Result<T, String> {
        self.post_within(path, body, read, 2, self.config.timeout).await.map_err(|failed| failed.reason)
    }

    /// [`post`](Self::post) once, waiting at most `timeout` (and never longer
    /// than the configured timeout): for a call someone waits on that has a
    /// way on without it.
    pub async fn post_once<T>(
        &self,
        path: &str,
        body: &Value,
        read: impl Fn(Value) -> Result<T, String>,
        timeout: Duration,
    ) -> Result<T, Failed> {
        self.post_within(path, body, read, 1, timeout.min(self.config.timeout)).await
    }

    async fn post_within<T>(
        &self,
        path: &str,
        body: &Value,
        read: impl Fn(Value) -> Result<T, String>,
        attempts: usize,
        timeout: Duration,
    ) -> Result<T, Failed> {
        let body = Bytes::from(body.to_string());
        let mut last = Failed { retry: false, status: None, reason: String::new() };
        for attempt in 0..attempts {
            match self
                .attempt(path, body.clone(), timeout)
                .await
                .and_then(|reply| read(reply).map_err(|reason| Failed { retry: false, status: None, reason }))
            {
                Ok(value) => return Ok(value),
                Err(failed) => {
                    tracing::warn!(attempt, path, model = %self.config.model, reason = %failed.reason, "the model endpoint did not answer");
                    let retry = failed.retry;
                    last = failed;
                    if !retry {
                        break;
                    }
                }
            }
        }
        Err(last)
    }

    async fn attempt(&self, path: &str, body: Bytes, timeout: Duration) -> Result<Value, Failed> {
        let fail = |retry: bool, reason: String| Failed { retry, status: None, reason };
        let mut request =
            hyper::Request::post(format!("{}/{path}", self.config.base_url)).header("content-type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let request = request.body(Full::new(body)).map_err(|e| fail(false, format!("bad request: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| fail(true, format!("transport: {e}")))?;
            let status = response.status();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_REPLY)
                .collect()
                .await
                .map_err(|e| fail(!e.is::<http_body_util::LengthLimitError>(), format!("body: {e}")))?
                .to_bytes();
            Ok::<_, Failed>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| fail(true, format!("no answer within {timeout:?}")))??;
        if !status.is_success() {
            let retry = status.as_u16() == 429 || status.is_server_error();
            return Err(Failed { status: Some(status.as_u16()), ..fail(retry, format!("status {status}")) });
        }
        serde_json::from_slice(&bytes).map_err(|e| fail(false, format!("not JSON: {e}")))
    }
}
