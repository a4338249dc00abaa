//! Stand-ins for OpenAI-compatible endpoints (chat completions, embeddings),
//! on a free port: each records its requests and answers as the test
//! scripts it.

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
    serve(Arc::new(move |n, _body: &Value| {
        match replies.get(n).or(replies.last()).cloned().unwrap_or(Reply::Status(500)) {
            Reply::Content(text) => Answer::Json(
                200,
                json!({ "id": "cmpl-1", "object": "chat.completion",
                        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }] }),
            ),
            Reply::Status(status) => Answer::Json(status, json!({ "error": { "message": "stand-in failure" } })),
            Reply::Stall(time) => Answer::Stall(time),
        }
    }))
    .await
}

/// What a text is embedded as by [`start_embeddings`].
pub type Embed = Arc<dyn Fn(&str) -> Vec<f32> + Send + Sync>;

/// Starts a stand-in `/v1/embeddings` endpoint: each request's `input` texts
/// embedded by `embed`, in order. With `stall_from`, requests from that one
/// on (counted from 0) get no answer for an hour.
pub async fn start_embeddings(embed: Embed, stall_from: Option<usize>) -> StandIn {
    serve(Arc::new(move |n, body: &Value| {
        if stall_from.is_some_and(|from| n >= from) {
            return Answer::Stall(Duration::from_secs(3600));
        }
        let inputs: Vec<&str> =
            body["input"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| json!({ "object": "embedding", "index": index, "embedding": embed(text) }))
            .collect();
        Answer::Json(200, json!({ "object": "list", "data": data, "model": body["model"] }))
    }))
    .await
}

/// What answers a request's JSON body: a status and JSON.
pub type Respond = Arc<dyn Fn(&Value) -> (u16, Value) + Send + Sync>;

/// Starts a stand-in that answers each request's JSON body with `answer`.
pub async fn start_with(answer: Respond) -> StandIn {
    serve(Arc::new(move |_n, body: &Value| {
        let (status, reply) = answer(body);
        Answer::Json(status, reply)
    }))
    .await
}

/// What the stand-in does with one request.
enum Answer {
    Json(u16, Value),
    /// No answer for this long (then the connection is dropped).
    Stall(Duration),
}

type Answering = Arc<dyn Fn(usize, &Value) -> Answer + Send + Sync>;

async fn serve(answer: Answering) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("an address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut stream, _)) = listener.accept().await {
            let number = n;
            n += 1;
            let (log, answer) = (log.clone(), answer.clone());
            tokio::spawn(async move {
                let Some((head, body)) = read_request(&mut stream).await else { return };
                let auth = head
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
                    .unwrap_or_default()
                    .to_owned();
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let answered = answer(number, &body);
                log.lock().expect("the request log").push((auth, body));
                let (status, body) = match answered {
                    Answer::Json(status, body) => (status, body.to_string()),
                    Answer::Stall(time) => {
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
