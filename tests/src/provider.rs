//! A stand-in OpenID Connect provider: serves discovery and JWKS documents over
//! plain HTTP on a free port, and records which paths were asked for.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct Provider {
    /// The issuer URL (`http://127.0.0.1:PORT`).
    pub issuer: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Provider {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("the request log").clone()
    }
}

pub async fn serve(jwks: Value) -> Provider {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let issuer = format!("http://{}", listener.local_addr().expect("an address"));
    let configuration = json!({ "issuer": issuer, "jwks_uri": format!("{issuer}/jwks.json") });
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = vec![0u8; 8192];
            let mut read = 0;
            while !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") && read < buffer.len() {
                match stream.read(&mut buffer[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let request = String::from_utf8_lossy(&buffer[..read]);
            let path = request.split_whitespace().nth(1).unwrap_or_default().to_owned();
            log.lock().expect("the request log").push(path.clone());
            let (status, body) = match path.as_str() {
                "/.well-known/openid-configuration" => ("200 OK", configuration.to_string()),
                "/jwks.json" => ("200 OK", jwks.to_string()),
                _ => ("404 Not Found", "{}".to_owned()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    Provider { issuer, requests }
}
