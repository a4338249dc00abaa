//! Small HTTP/1.1 pieces for the CLI tests: a listener that records what the
//! client sends, a proxy that loses an answer, and a raw GET for the browser step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Reads one request (head and `content-length` body); `None` at end of stream.
pub async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request { method, path, headers, body })
}

/// Reads one response whole (head and `content-length` body), as raw bytes.
pub async fn read_response(stream: &mut TcpStream) -> Vec<u8> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..i]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buffer.len() < i + 4 + length {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return buffer,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            }
            return buffer;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return buffer,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

fn respond_json(body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: req_capture\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

type Answers = Arc<dyn Fn(usize) -> Value + Send + Sync>;

/// A server that records every request and answers the n-th (from 0) with
/// `answers(n)`.
pub struct Capture {
    pub base: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Capture {
    /// Answers every request with `answer`.
    pub async fn start(answer: Value) -> Self {
        Self::start_with(move |_| answer.clone()).await
    }

    pub async fn start_with(answers: impl Fn(usize) -> Value + Send + Sync + 'static) -> Self {
        let answers: Answers = Arc::new(answers);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                let answers = answers.clone();
                tokio::spawn(async move {
                    while let Some(request) = read_request(&mut stream).await {
                        let n = {
                            let mut log = log.lock().expect("the request log");
                            log.push(request);
                            log.len() - 1
                        };
                        if stream.write_all(&respond_json(&answers(n))).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { base, requests }
    }

    /// Takes the requests recorded so far.
    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.requests.lock().expect("the request log"))
    }
}

/// A proxy in front of `upstream` that forwards the first request, lets the
/// server answer it, then drops the client's connection without passing the
/// answer on; later requests pass through. Records every request it forwarded.
pub struct LossyProxy {
    pub base: String,
    forwarded: Arc<Mutex<Vec<Request>>>,
}

impl LossyProxy {
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let forwarded = Arc::new(Mutex::new(Vec::<Request>::new()));
        let log = forwarded.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Some(request) = read_request(&mut client).await else { continue };
                let first = {
                    let mut log = log.lock().expect("the proxy log");
                    log.push(request.clone());
                    log.len() == 1
                };
                let mut server = TcpStream::connect(&upstream).await.expect("the upstream answers");
                let mut raw = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
                for (name, value) in &request.headers {
                    if name != "connection" {
                        raw.push_str(&format!("{name}: {value}\r\n"));
                    }
                }
                raw.push_str("connection: close\r\n\r\n");
                let mut bytes = raw.into_bytes();
                bytes.extend_from_slice(&request.body);
                server.write_all(&bytes).await.expect("forwarded");
                let answer = read_response(&mut server).await;
                if first {
                    // The server did the work; the client never hears of it.
                    drop(client);
                } else {
                    let _ = client.write_all(&answer).await;
                }
            }
        });
        Self { base, forwarded }
    }

    pub fn forwarded(&self) -> Vec<Request> {
        self.forwarded.lock().expect("the proxy log").clone()
    }
}

/// A raw GET: (status, headers with lower-cased names in order, body).
pub async fn get(url: &str, cookies: &str) -> (u16, Vec<(String, String)>, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = TcpStream::connect(host).await.expect("the server answers");
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    if !cookies.is_empty() {
        request.push_str(&format!("cookie: {cookies}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}
