//! Readiness: whether PostgreSQL (migrated for this binary) and Redis answer
//! within `runtime::READY_TIMEOUT`, watched every two seconds and logged the
//! moment it changes; served with the metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;
use sqlx::PgPool;
use svc_core::runtime::{self, Schema};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const EVERY: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct Readiness {
    database: AtomicBool,
    redis: AtomicBool,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.database.load(Ordering::Relaxed) && self.redis.load(Ordering::Relaxed)
    }
}

/// Checks PostgreSQL and Redis now and every two seconds until `stop`.
pub async fn watch(pool: PgPool, redis: redis::Client, readiness: Arc<Readiness>, stop: CancellationToken) {
    let mut first = true;
    loop {
        let (database, redis) = tokio::join!(runtime::check_database(&pool), runtime::check_redis(&redis));
        let database = database.and_then(|schema| match schema {
            Schema::Current => Ok(()),
            schema => Err(format!("the database schema is {}: run `svc-api migrate`", schema.as_str())),
        });
        for (flag, name, result) in [(&readiness.database, "PostgreSQL", database), (&readiness.redis, "Redis", redis)]
        {
            let before = flag.swap(result.is_ok(), Ordering::Relaxed);
            match result {
                Err(error) if before || first => tracing::error!(%error, "cannot reach {name}: not ready"),
                Ok(()) if !before && !first => tracing::info!("{name} is reachable again"),
                _ => {}
            }
        }
        first = false;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

#[derive(Clone)]
struct Shared {
    readiness: Arc<Readiness>,
    metrics: Arc<Metrics>,
}

/// Binds `/healthz`, `/readyz` and `/metrics`; returns the bound address and the
/// server to run until `stop`.
pub async fn serve(
    bind: SocketAddr,
    readiness: Arc<Readiness>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> std::io::Result<(SocketAddr, impl Future<Output = ()>)> {
    let listener = TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let router = Router::new()
        .route("/healthz", get(|| async { axum::Json(json!({ "status": "ok" })) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(Shared { readiness, metrics });
    let server = async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        if let Err(error) = served {
            tracing::warn!(%error, "the health server stopped");
        }
    };
    Ok((addr, server))
}

async fn readyz(State(shared): State<Shared>) -> impl IntoResponse {
    let ready = shared.readiness.ready();
    let word = |flag: &AtomicBool| if flag.load(Ordering::Relaxed) { "ok" } else { "unreachable" };
    let body = json!({
        "status": if ready { "ready" } else { "unavailable" },
        "checks": { "database": word(&shared.readiness.database), "redis": word(&shared.readiness.redis) },
    });
    (if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, axum::Json(body))
}

async fn metrics_text(State(shared): State<Shared>) -> impl IntoResponse {
    let text = shared.metrics.render(shared.readiness.ready());
    ([(header::CONTENT_TYPE, svc_core::metrics::CONTENT_TYPE)], text)
}
