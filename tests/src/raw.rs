//! HTTP/1.1 over a plain socket, for tests of what a client library would never
//! send: malformed heads, trickled bodies, reused connections.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest any read here waits: tests bound their loops, not their speed.
const PATIENCE: Duration = Duration::from_secs(30);

/// One response read off a raw connection.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

pub struct RawConn {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl RawConn {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self { stream: TcpStream::connect(addr).await.expect("the server accepts"), buffer: Vec::new() }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("the server reads");
    }

    /// Sends if the server still reads; `false` once it has closed.
    pub async fn try_send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Reads more bytes; `false` at the end of the stream.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => false,
            Ok(Ok(n)) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                true
            }
            Err(_) => panic!("no byte and no close within {PATIENCE:?}"),
        }
    }

    /// Reads one response (a `Content-Length` body); `None` when the server
    /// closed the connection first.
    pub async fn response(&mut self) -> Option<RawResponse> {
        let head_end = loop {
            if let Some(at) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            if !self.fill().await {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok())?;
        while self.buffer.len() < head_end + length {
            if !self.fill().await {
                return None;
            }
        }
        let body = self.buffer[head_end..head_end + length].to_vec();
        self.buffer.drain(..head_end + length);
        Some(RawResponse { status, headers, body })
    }

    /// Whether the server closes the connection (reading and dropping any bytes).
    pub async fn closed(&mut self) -> bool {
        while self.fill().await {}
        true
    }
}
