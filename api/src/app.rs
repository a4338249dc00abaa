//! The API application: state, router and server lifecycle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get};
use axum::serve::ListenerExt;
use sqlx::PgPool;
use svc_contract::{Problem, ProblemCode};
use svc_core::Service;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::config::ServeConfig;
use crate::discovery::Documents;
use crate::metrics::Metrics;
use crate::response::{self, RequestId};
use crate::{discovery, health, mcp, operations};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub service: Arc<Service>,
    pub redis: redis::Client,
    pub metrics: Arc<Metrics>,
    pub documents: Arc<Documents>,
}

impl AppState {
    pub fn new(pool: PgPool, config: &ServeConfig) -> anyhow::Result<Self> {
        let service = Service::new(pool, config.core()?).map_err(|e| anyhow::anyhow!(e))?;
        Ok(Self {
            service: Arc::new(service),
            redis: redis::Client::open(config.redis_url())?,
            metrics: Arc::new(Metrics::default()),
            documents: Arc::new(Documents::new(config)),
        })
    }
}

/// Host names the MCP endpoint accepts: the public base URL's, and loopback.
fn allowed_hosts(config: &ServeConfig) -> Vec<String> {
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if let Ok(uri) = config.public_base_url().parse::<http::Uri>()
        && let Some(authority) = uri.authority()
    {
        hosts.push(authority.host().to_owned());
        hosts.push(authority.as_str().to_owned());
    }
    hosts.push(config.bind.ip().to_string());
    hosts
}

/// Every route of the API.
pub fn router(state: AppState, config: &ServeConfig, shutdown: CancellationToken) -> Router {
    let mcp = Router::new()
        .nest_service("/api/mcp", mcp::service(state.clone(), allowed_hosts(config), shutdown))
        .layer(middleware::from_fn_with_state(state.clone(), mcp::gate));
    Router::new()
        .route("/api/public/operations/{*path}", any(operations::handle))
        .route("/api/public/client-config", get(discovery::client_config))
        .route("/api/public/catalog", get(discovery::catalog))
        .route("/api/public/openapi.json", get(discovery::openapi))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(mcp)
        .fallback(not_found)
        .with_state(state)
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request| {
            let request_id = request.extensions().get::<RequestId>().map(|r| r.0.as_str()).unwrap_or_default();
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id)
        }))
        .layer(middleware::from_fn(request_id))
}

/// Gives every request an id and every response its `X-Request-Id`.
async fn request_id(mut request: Request, next: Next) -> Response {
    let id = RequestId::new();
    request.extensions_mut().insert(id.clone());
    let mut response = next.run(request).await;
    if !response.headers().contains_key(response::REQUEST_ID_HEADER) {
        response::set_request_id(response.headers_mut(), &id);
    }
    response
}

async fn not_found(request: Request) -> Response {
    let id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    response::problem(&Problem::new(ProblemCode::ResourceNotFound, "There is nothing at this address."), &id)
}

/// Accepted connections send small responses at once: without `TCP_NODELAY`,
/// Nagle's algorithm can hold a response back until the client acknowledges the
/// previous segment (tens of milliseconds with delayed ACKs).
pub fn no_delay(listener: TcpListener) -> impl axum::serve::Listener<Io = TcpStream, Addr = SocketAddr> {
    listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    })
}

/// A bound, ready-to-run API server.
pub struct App {
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    grace: Duration,
}

impl App {
    /// Binds the listener (port 0 picks a free port) and builds the router.
    pub async fn build(config: &ServeConfig, pool: PgPool) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(config.bind).await?;
        let shutdown = CancellationToken::new();
        let state = AppState::new(pool, config)?;
        let router = router(state, config, shutdown.clone());
        Ok(Self { listener, router, shutdown, grace: Duration::from_secs(config.shutdown_grace_secs) })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves, then lets in-flight requests finish within
    /// the grace period.
    pub async fn run_until(self, stop: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let shutdown = self.shutdown.clone();
        let server = axum::serve(no_delay(self.listener), self.router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        let mut server = tokio::spawn(server.into_future());
        tokio::select! {
            result = &mut server => return Ok(result??),
            () = stop => {}
        }
        tracing::info!(grace_secs = self.grace.as_secs(), "shutting down: finishing in-flight requests");
        shutdown.cancel();
        match tokio::time::timeout(self.grace, &mut server).await {
            Ok(result) => result??,
            Err(_) => {
                tracing::warn!("grace period over; dropping the remaining connections");
                server.abort();
            }
        }
        Ok(())
    }
}
