//! The API application: state, router and server lifecycle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use sqlx::PgPool;
use svc_contract::{Problem, ProblemCode};
use svc_core::Service;
use svc_core::jobs::Queue;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::{Service as _, service_fn};
use tracing::Instrument;

use crate::body::BodyPolicy;
use crate::config::ServeConfig;
use crate::discovery::Documents;
use crate::guard::Guarded;
use crate::metrics::Metrics;
use crate::public::PublicSide;
use crate::response::{self, RequestId};
use crate::{access, discovery, health, keepalive, mcp, operations, public};

/// What every handler shares. Cloned for every extractor and middleware of
/// every request (and by rmcp for every MCP request), so a clone is one
/// reference count, not one per part (a profile of the MCP path showed the
/// clones and drops of the parts, the Redis client's allocation included).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    pub service: Arc<Service>,
    pub redis: redis::Client,
    pub metrics: Arc<Metrics>,
    pub documents: Arc<Documents>,
    pub bodies: BodyPolicy,
    pub public: Arc<PublicSide>,
    pub resource_metadata: Arc<crate::resource_metadata::ResourceMetadata>,
    /// The development identity provider, with `--dev-idp`.
    pub dev_idp: Option<Arc<crate::devidp::DevIdp>>,
    /// The web application at `/account`.
    pub account: Arc<crate::account::Account>,
}

impl AppState {
    pub fn new(pool: PgPool, config: &ServeConfig) -> anyhow::Result<Self> {
        let queue = Queue::new(config.redis_url(), &config.queue_namespace)?;
        let dev_idp = config.dev_idp.then(|| crate::devidp::DevIdp::new(config)).transpose()?.map(Arc::new);
        let oidc = match &dev_idp {
            Some(idp) => Some(idp.trust()),
            None => config.oidc()?,
        };
        let account = Arc::new(crate::account::Account::new(config, oidc.as_ref())?);
        let service = Service::new(pool, Some(queue), config.core_with(oidc))
            .map_err(|e| anyhow::anyhow!(e))?
            .with_llm(config.llm()?)
            .with_meaning(config.meaning()?);
        Ok(Self(Arc::new(Shared {
            service: Arc::new(service),
            redis: svc_core::jobs::redis_client(config.redis_url())?,
            metrics: Arc::new(Metrics::default()),
            documents: Arc::new(Documents::new(config)),
            bodies: config.body_policy(),
            public: Arc::new(PublicSide::new(
                &config.public_base_url(),
                config.public_answers_per_minute,
                config.client_ip_header()?,
            )),
            resource_metadata: Arc::new(crate::resource_metadata::ResourceMetadata::new(config)),
            dev_idp,
            account,
        })))
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

/// Every route of the API, and the task that keeps knowledge_source.wait's
/// answers in step with PostgreSQL (until `shutdown`).
pub fn router(state: AppState, config: &ServeConfig, shutdown: CancellationToken) -> Router {
    let (service, stop) = (state.service.clone(), shutdown.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = service.follow_changes() => {}
        }
    });
    let mcp_service = mcp::service(state.clone(), allowed_hosts(config), shutdown);
    let gate = mcp::Gate::new(state.clone(), &mcp_service.config);
    let mcp =
        Router::new().nest_service("/api/mcp", mcp_service).layer(middleware::from_fn_with_state(gate, mcp::gate));
    let resource_metadata = get(crate::resource_metadata::document);
    let metrics = state.metrics.clone();
    let dev_idp = match &state.dev_idp {
        Some(idp) => crate::devidp::routes(idp.clone()),
        None => Router::new(),
    };
    Router::new()
        .route("/api/public/operations/{*path}", any(operations::handle))
        .route("/api/public/client-config", get(discovery::client_config))
        .route("/api/public/catalog", get(discovery::catalog))
        .route("/api/public/openapi.json", get(discovery::openapi))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/api/public/chat/{agent_id}/answers", public::answers_route())
        .route("/api/public/chat/{agent_id}/widget", public::widget_route())
        .route("/chat/{agent_id}", public::page_route())
        .route("/chat/assets/widget.js", public::script_route())
        .route("/chat/assets/icon.svg", public::icon_route())
        .route("/favicon.ico", public::icon_route())
        .route("/chat/assets/chat.css", public::style_route())
        .route(crate::resource_metadata::PATH, resource_metadata.clone())
        .route(&format!("{}/api/mcp", crate::resource_metadata::PATH), resource_metadata)
        .merge(mcp)
        .merge(dev_idp)
        .merge(crate::account::routes())
        .layer(middleware::from_fn_with_state(state.clone(), crate::resource_metadata::challenge))
        .fallback(not_found)
        .with_state(state)
        .layer(middleware::from_fn_with_state(metrics, edge))
}

/// What every request goes through on its way in and out, in this order:
/// it gets an id (and its response an `X-Request-Id`), its body is tracked
/// so the connection stays reusable (`keepalive`), and it runs in a span
/// with its access line written and its response counted (`access`). One
/// layer rather than three: axum boxes each layer's future and clones the
/// service beneath it on every request.
async fn edge(State(metrics): State<Arc<Metrics>>, mut request: Request, next: Next) -> Response {
    let id = RequestId::new();
    request.extensions_mut().insert(id.clone());
    let (request, unread) = keepalive::track(request);
    let line = access::Line::begin(&request, &id);
    let span = line.span();
    let mut response = next.run(request).instrument(span).await;
    line.end(&metrics, &response);
    unread.settle(&mut response).await;
    if !response.headers().contains_key(response::REQUEST_ID_HEADER) {
        response::set_request_id(response.headers_mut(), &id);
    }
    response
}

async fn not_found(request: Request) -> Response {
    let id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    response::problem(&Problem::new(ProblemCode::ResourceNotFound, "There is nothing at this address."), &id)
}

/// A bound, ready-to-run API server.
pub struct App {
    /// `{base_url}`, with the port the listener got.
    pub public_base_url: String,
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    grace: Duration,
    header_timeout: Duration,
}

impl App {
    /// Binds the listener (port 0 picks a free port) and builds the router.
    pub async fn build(config: &ServeConfig, pool: PgPool) -> anyhow::Result<Self> {
        if config.dev_idp {
            crate::devidp::check(config)?;
        }
        let listener = TcpListener::bind(config.bind).await?;
        let config = &config.bound_to(listener.local_addr()?);
        let shutdown = CancellationToken::new();
        let state = AppState::new(pool, config)?;
        if state.dev_idp.is_some() {
            crate::devidp::prepare(&state, config).await?;
        }
        let router = router(state, config, shutdown.clone());
        Ok(Self {
            public_base_url: config.public_base_url(),
            listener,
            router,
            shutdown,
            grace: Duration::from_secs(config.shutdown_grace_secs),
            header_timeout: Duration::from_secs(config.header_read_timeout_secs.max(1)),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves; see [`serve`].
    pub async fn run_until(self, stop: impl Future<Output = ()> + Send + 'static) {
        let serving = Serving { header_timeout: self.header_timeout, grace: self.grace, shutdown: self.shutdown };
        serve(self.listener, self.router, serving, stop).await;
    }
}

/// How [`serve`] treats connections.
pub struct Serving {
    /// Longest wait for a request head (and for the next request on an idle
    /// keep-alive connection: hyper starts the clock when it waits).
    pub header_timeout: Duration,
    /// Time in-flight requests get after `stop`.
    pub grace: Duration,
    /// Cancelled when shutdown starts (long-lived handlers watch it).
    pub shutdown: CancellationToken,
}

/// Accepts connections on `listener` and serves `router` on them until `stop`
/// resolves; then stops accepting, closes idle connections, and lets in-flight
/// requests finish within the grace period.
///
/// Each connection's reads pass through [`Guarded`], and each request carries
/// the client's address (`ConnectInfo`).
pub async fn serve(listener: TcpListener, router: Router, serving: Serving, stop: impl Future<Output = ()> + Send) {
    // HTTP/1.1 only: clients reach the API directly or through a proxy that
    // speaks HTTP/1.1 to it, and hyper's header timer runs from the first byte
    // awaited (its auto-detecting builder waits for the first bytes untimed).
    // `half_close`: a read EOF mid-request (the guard's refusal of the next
    // head, or a client done sending) lets the response in progress finish.
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(serving.header_timeout).half_close(true);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, then go on.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Small responses go out at once: without TCP_NODELAY, Nagle's algorithm
        // can hold one back until the client acknowledges the previous segment.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
        let router = router.clone();
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().call(request.map(Body::new))
        });
        let connection =
            builder.serve_connection(TokioIo::new(Guarded::new(stream)), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(grace_secs = serving.grace.as_secs(), "shutting down: finishing in-flight requests");
    serving.shutdown.cancel();
    if tokio::time::timeout(serving.grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("grace period over; dropping the remaining connections");
    }
}
