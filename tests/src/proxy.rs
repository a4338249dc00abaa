//! A TCP proxy on a loopback port that a test can cut and restore: the
//! processes behind it lose PostgreSQL or Redis as they would behind a failed
//! network, and find it again when it returns.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

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
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
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
