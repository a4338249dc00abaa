//! A stand-in for an OpenAI-compatible chat-completions endpoint, on a free
//! port: it records each request and answers as the test scripts it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How the stand-in answers one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with this message content.
    Content(String),
    /// This status with an error body.
    Status(u16),
    /// No answer for this long (then the connection is dropped).
    Stall(Duration),
}

pub struct StandIn {
    /// Base URL (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl StandIn {
    /// Every request so far: the `authorization` header, and the JSON body.
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().expect("the request log").clone()
    }
}

/// Starts a stand-in that answers its requests with `replies` in order (the
/// last one again once they run out).
pub async fn start(replies: Vec<Reply>) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("an address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut stream, _)) = listener.accept().await {
            let reply = replies.get(n).or(replies.last()).cloned().unwrap_or(Reply::Status(500));
            n += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let Some((head, body)) = read_request(&mut stream).await else { return };
                let auth = head
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
                    .unwrap_or_default()
                    .to_owned();
                log.lock().expect("the request log").push((auth, serde_json::from_slice(&body).unwrap_or(Value::Null)));
                let (status, body) = match reply {
                    Reply::Content(text) => (
                        200,
                        json!({ "id": "cmpl-1", "object": "chat.completion",
                                "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }] })
                        .to_string(),
                    ),
                    Reply::Status(status) => (status, json!({ "error": { "message": "stand-in failure" } }).to_string()),
                    Reply::Stall(time) => {
                        tokio::time::sleep(time).await;
                        return;
                    }
                };
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    StandIn { base_url, requests }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buffer.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..n]);
            }
            return Some((head, buffer[end + 4..end + 4 + length].to_vec()));
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}
