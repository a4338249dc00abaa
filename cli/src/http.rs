//! HTTP with a small synchronous client (ureq): operation calls carrying the
//! client's headers, and plain requests for discovery and OAuth.
//!
//! Every request is retried once on a transport failure or a 503, and on nothing
//! else (contract §14). The retry sends the same bytes, so a mutation carries the
//! same idempotency key and the server runs it at most once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use svc_contract::{CLIENT_VERSION_HEADER, SECRET_LOCATION_HEADER, WORKSPACE_HEADER};
use ureq::http::Response;
use ureq::tls::{RootCerts, TlsConfig, TlsProvider};

use crate::outcome::Failure;
use crate::secrets::Location;

/// The version this client declares in `Svc-Client-Version`.
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Largest answer read (a reconcile run lists up to 100 sources).
const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;
/// Longest wait for `Retry-After` before the one retry.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);
const TRANSPORT_RETRY_DELAY: Duration = Duration::from_millis(250);

pub struct Http {
    agent: ureq::Agent,
}

/// An HTTP answer with a JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub request_id: Option<String>,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// How an operation call presents itself.
pub struct Call<'a> {
    pub url: String,
    pub bearer: &'a str,
    pub secret_location: Location,
    pub workspace: Option<&'a str>,
    pub body: &'a [u8],
}

impl Default for Http {
    fn default() -> Self {
        // ureq builds the rustls client configuration at the first TLS connection,
        // so plain-HTTP calls pay nothing for it.
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(RootCerts::WebPki)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_recv_response(Some(Duration::from_secs(300)))
            .user_agent(format!("svc/{CLIENT_VERSION}"))
            .build()
            .new_agent();
        Self { agent }
    }
}

impl Http {
    /// POSTs an operation's input (contract §1).
    pub fn call(&self, call: &Call<'_>) -> Result<Answer, Failure> {
        self.with_retry(&call.url, || {
            let mut request = self
                .agent
                .post(&call.url)
                .header("authorization", format!("Bearer {}", call.bearer))
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .header(CLIENT_VERSION_HEADER, CLIENT_VERSION)
                .header(SECRET_LOCATION_HEADER, call.secret_location.as_str());
            if let Some(workspace) = call.workspace {
                request = request.header(WORKSPACE_HEADER, workspace);
            }
            request.send(call.body)
        })
    }

    /// GETs a JSON document (discovery).
    pub fn get(&self, url: &str) -> Result<Answer, Failure> {
        self.with_retry(url, || {
            self.agent
                .get(url)
                .header("accept", "application/json")
                .header(CLIENT_VERSION_HEADER, CLIENT_VERSION)
                .call()
        })
    }

    /// GETs a JSON document once, giving up after `timeout` (`svc version`).
    pub fn get_quick(&self, url: &str, timeout: Duration) -> Result<Answer, Failure> {
        let response = self
            .agent
            .get(url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("accept", "application/json")
            .header(CLIENT_VERSION_HEADER, CLIENT_VERSION)
            .call()
            .map_err(|e| unreachable(url, &e))?;
        read(url, response)
    }

    /// POSTs a form (the OAuth token and revocation endpoints).
    pub fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Result<Answer, Failure> {
        self.with_retry(url, || {
            self.agent.post(url).header("accept", "application/json").send_form(form.iter().copied())
        })
    }

    fn with_retry(
        &self,
        url: &str,
        send: impl Fn() -> Result<Response<ureq::Body>, ureq::Error>,
    ) -> Result<Answer, Failure> {
        let delay = match send() {
            Ok(response) if response.status().as_u16() == 503 => retry_after(&response),
            Ok(response) => return read(url, response),
            Err(_) => TRANSPORT_RETRY_DELAY,
        };
        std::thread::sleep(delay);
        let response = send().map_err(|e| unreachable(url, &e))?;
        read(url, response)
    }
}

fn unreachable(url: &str, error: &ureq::Error) -> Failure {
    Failure::transport(format!("Could not reach {}: {error}.", origin(url)))
}

/// The scheme, host and port of a URL: enough to say what could not be reached.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    url[after_scheme..].find('/').map_or(url, |i| &url[..after_scheme + i])
}

fn retry_after(response: &Response<ureq::Body>) -> Duration {
    let seconds = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    seconds.map_or(Duration::from_secs(1), Duration::from_secs).min(MAX_RETRY_DELAY)
}

fn read(url: &str, mut response: Response<ureq::Body>) -> Result<Answer, Failure> {
    let status = response.status().as_u16();
    let request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_vec()
        .map_err(|e| Failure::transport(format!("The answer from {} was cut short: {e}.", origin(url))))?;
    match serde_json::from_slice(&bytes) {
        Ok(body) => Ok(Answer { status, body, request_id }),
        Err(_) => Err(Failure::with_request_id(
            svc_contract::Problem::new(
                svc_contract::ProblemCode::InternalError,
                format!("{} answered HTTP {status} without a JSON body.", origin(url)),
            )
            .with_detail("reason", "unreadable_answer")
            .with_detail("status", status),
            request_id,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_name_no_path() {
        assert_eq!(origin("http://127.0.0.1:8080/api/public/x"), "http://127.0.0.1:8080");
        assert_eq!(origin("https://svc.example.com"), "https://svc.example.com");
    }
}
