//! A TCP proxy on a loopback port that a test can cut and restore: the
//! processes behind it lose PostgreSQL or Redis as they would behind a failed
//! network, and find it again when it returns.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Forwards `127.0.0.1:{port}` to a target while not cut.
pub struct Proxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
    accepting: AbortHandle,
}

#[derive(Default)]
struct State {
    cut: bool,
    /// A link whose client sends these bytes is dropped before they pass.
    poison: Option<Vec<u8>>,
    links: Vec<AbortHandle>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("an address").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if shared.lock().expect("the proxy's state").cut {
                    // Refused: the connection closes at once.
                    continue;
                }
                let state = shared.clone();
                let link = tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else { return };
                    let (mut from_client, mut to_client) = inbound.split();
                    let (mut from_server, mut to_server) = outbound.into_split();
                    let up = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = from_client.read(&mut buf).await?;
                            let poison = state.lock().expect("the proxy's state").poison.clone();
                            if n == 0 || poison.is_some_and(|p| buf[..n].windows(p.len()).any(|w| w == p)) {
                                return Ok::<(), std::io::Error>(());
                            }
                            to_server.write_all(&buf[..n]).await?;
                        }
                    };
                    let down = tokio::io::copy(&mut from_server, &mut to_client);
                    tokio::select! {
                        _ = up => {}
                        _ = down => {}
                    }
                });
                let mut state = shared.lock().expect("the proxy's state");
                state.links.retain(|l| !l.is_finished());
                state.links.push(link.abort_handle());
            }
        })
        .abort_handle();
        Self { port, state, accepting }
    }

    /// Drops every connection through it and refuses new ones.
    pub fn cut(&self) {
        let mut state = self.state.lock().expect("the proxy's state");
        state.cut = true;
        for link in state.links.drain(..) {
            link.abort();
        }
    }

    /// From now on, drops every link whose client sends `bytes` (a statement
    /// that "loses its connection" every time it is sent).
    pub fn drop_on(&self, bytes: &[u8]) {
        self.state.lock().expect("the proxy's state").poison = Some(bytes.to_vec());
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.state.lock().expect("the proxy's state").cut = false;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
