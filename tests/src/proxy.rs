//! A TCP proxy on a loopback port that a test can cut, black-hole and restore:
//! the processes behind it lose PostgreSQL or Redis as they would behind a
//! failed network, and find it again when it returns.
//!
//! Cut, every connection closes at once (a refused or reset link). Black-holed,
//! nothing passes in either direction but every socket stays open, and new
//! connections are accepted and then hear nothing: a partition, a failed
//! switch or a lost host, which neither side can tell from a slow peer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// Forwards `127.0.0.1:{port}` to a target while not cut.
pub struct Proxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
    /// `true` while black-holed.
    holes: watch::Sender<bool>,
    accepting: AbortHandle,
}

#[derive(Default)]
struct State {
    cut: bool,
    /// A link whose client sends these bytes is dropped before they pass.
    poison: Option<Vec<u8>>,
    /// Once a client sends these bytes, they pass, then everything is black-holed.
    trap: Option<Vec<u8>>,
    links: Vec<AbortHandle>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("an address").port();
        let state = Arc::new(Mutex::new(State::default()));
        let (holes, _) = watch::channel(false);
        let (shared, hole) = (state.clone(), holes.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if shared.lock().expect("the proxy's state").cut {
                    // Refused: the connection closes at once.
                    continue;
                }
                let (state, hole) = (shared.clone(), hole.clone());
                let link = tokio::spawn(async move {
                    // Accepted in a black hole: nothing reaches the target until it ends.
                    open(&hole).await;
                    let Ok(outbound) = TcpStream::connect(target).await else { return };
                    let (mut from_client, mut to_client) = inbound.split();
                    let (mut from_server, mut to_server) = outbound.into_split();
                    let up = forward(&mut from_client, &mut to_server, &state, &hole, true);
                    let down = forward(&mut from_server, &mut to_client, &state, &hole, false);
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
        Self { port, state, holes, accepting }
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

    /// Stops forwarding anything, in both directions, keeping every socket
    /// open (and accepting new connections into the same silence).
    pub fn black_hole(&self) {
        self.holes.send_replace(true);
    }

    /// Black-holes everything the moment a client sends `bytes` (which still
    /// pass): a partition right after a given statement was sent.
    pub fn black_hole_on(&self, bytes: &[u8]) {
        self.state.lock().expect("the proxy's state").trap = Some(bytes.to_vec());
    }

    /// Whether it is black-holed now.
    pub fn is_black_holed(&self) -> bool {
        *self.holes.borrow()
    }

    /// Accepts connections again, and forwards again what a black hole held.
    pub fn restore(&self) {
        self.state.lock().expect("the proxy's state").cut = false;
        self.holes.send_replace(false);
    }
}

/// Waits while the proxy is black-holed.
async fn open(hole: &watch::Sender<bool>) {
    let mut holes = hole.subscribe();
    let _ = holes.wait_for(|holed| !holed).await;
}

/// Copies `from` to `to` until either side closes, holding what it read while
/// the proxy is black-holed; from a client (`up`), also the poison and the trap.
async fn forward(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    state: &Mutex<State>,
    hole: &watch::Sender<bool>,
    up: bool,
) -> std::io::Result<()> {
    let contains = |haystack: &[u8], needle: &Option<Vec<u8>>| {
        needle.as_ref().is_some_and(|n| haystack.windows(n.len()).any(|w| w == n.as_slice()))
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        open(hole).await;
        let mut trapped = false;
        if up {
            let state = state.lock().expect("the proxy's state");
            if contains(&buf[..n], &state.poison) {
                return Ok(());
            }
            trapped = contains(&buf[..n], &state.trap);
        }
        to.write_all(&buf[..n]).await?;
        if trapped {
            state.lock().expect("the proxy's state").trap = None;
            hole.send_replace(true);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
