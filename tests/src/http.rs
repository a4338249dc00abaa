//! A small HTTP client for tests that talk to a real server.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// A response with its body read whole.
#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl TestResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl HttpClient {
    pub fn new(base: impl Into<String>) -> Self {
        Self { client: Client::builder(TokioExecutor::new()).build_http(), base: base.into() }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> TestResponse {
        let mut request = Request::builder().method(method).uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).expect("a valid request");
        let response = self.client.request(request).await.expect("the server answers");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the body is readable").to_bytes();
        TestResponse { status: parts.status.as_u16(), headers: parts.headers, body }
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    /// POSTs a JSON body with optional bearer credential and Workspace.
    pub async fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        workspace: Option<&str>,
        body: &Value,
    ) -> TestResponse {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("authorization", auth));
        }
        if let Some(ws) = workspace {
            headers.push(("svc-workspace", ws));
        }
        self.send(Method::POST, path, &headers, body.to_string()).await
    }
}
