//! Liveness, readiness and metrics endpoints.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use svc_core::runtime;

use crate::app::AppState;

const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The process is alive.
pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// The database is reachable and migrated for this binary, and Redis is
/// reachable: 200, else 503 naming what is not (`unreachable`, or the
/// database's `unmigrated` or `behind`).
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let database = match tokio::time::timeout(CHECK_TIMEOUT, runtime::schema(state.service.pool())).await {
        Ok(Ok(schema)) => schema.as_str(),
        Ok(Err(error)) => {
            tracing::warn!(error = %svc_core::error::chain(&error), "not ready: PostgreSQL unreachable");
            "unreachable"
        }
        Err(_) => {
            tracing::warn!("not ready: PostgreSQL did not answer within {CHECK_TIMEOUT:?}");
            "unreachable"
        }
    };
    let redis = match tokio::time::timeout(CHECK_TIMEOUT, ping_redis(&state.redis)).await {
        Ok(Ok(())) => "ok",
        Ok(Err(error)) => {
            tracing::warn!(%error, "not ready: Redis unreachable");
            "unreachable"
        }
        Err(_) => {
            tracing::warn!("not ready: Redis did not answer within {CHECK_TIMEOUT:?}");
            "unreachable"
        }
    };
    let ready = database == "ok" && redis == "ok";
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({
        "status": if ready { "ready" } else { "unavailable" },
        "checks": { "database": database, "redis": redis }
    });
    (status, Json(body))
}

async fn ping_redis(client: &redis::Client) -> redis::RedisResult<()> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    redis::cmd("PING").query_async::<String>(&mut conn).await.map(|_| ())
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = state.metrics.render(state.service.pool());
    text.push_str(&queue_figures(&state).await);
    text.push_str(&wait_cache_figures(&state));
    text.push_str(&svc_core::faults::render());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// How often `knowledge_source.wait` was answered without reading PostgreSQL.
fn wait_cache_figures(state: &AppState) -> String {
    let mut out = String::new();
    let Some(figures) = state.service.wait_cache_figures() else { return out };
    out.push_str(
        "# HELP svc_wait_cache_lookups_total knowledge_source.wait answers looked up in this process's cache.\n",
    );
    out.push_str("# TYPE svc_wait_cache_lookups_total counter\n");
    out.push_str(&format!("svc_wait_cache_lookups_total{{result=\"hit\"}} {}\n", figures.hits));
    out.push_str(&format!("svc_wait_cache_lookups_total{{result=\"miss\"}} {}\n", figures.misses));
    out.push_str("# HELP svc_wait_cache_entries Answers kept; 0 while not hearing source changes from PostgreSQL.\n");
    out.push_str("# TYPE svc_wait_cache_entries gauge\n");
    out.push_str(&format!("svc_wait_cache_entries {}\n", figures.entries));
    out.push_str("# HELP svc_wait_cache_listening 1 while this process hears source changes from PostgreSQL.\n");
    out.push_str("# TYPE svc_wait_cache_listening gauge\n");
    out.push_str(&format!("svc_wait_cache_listening {}\n", u8::from(figures.live)));
    out
}

/// The knowledge backlog from PostgreSQL (what is left to do, whatever Redis
/// holds) and the queue from Redis; a figure that cannot be read is left out.
async fn queue_figures(state: &AppState) -> String {
    let mut out = String::new();
    let backlog = tokio::time::timeout(CHECK_TIMEOUT, state.service.backlog_figures()).await;
    if let Ok(Ok((count, oldest))) = backlog {
        out.push_str("# HELP svc_knowledge_backlog Revisions pending or processing.\n");
        out.push_str("# TYPE svc_knowledge_backlog gauge\n");
        out.push_str(&format!("svc_knowledge_backlog {count}\n"));
        out.push_str("# HELP svc_knowledge_oldest_pending_seconds Age of the oldest revision still to process.\n");
        out.push_str("# TYPE svc_knowledge_oldest_pending_seconds gauge\n");
        out.push_str(&format!("svc_knowledge_oldest_pending_seconds {oldest:.3}\n"));
    }
    if let Some(queue) = state.service.queue()
        && let Ok(depth) = queue.depth().await
    {
        out.push_str("# HELP svc_queue_jobs Jobs in the Redis queue, waiting or claimed by a worker.\n");
        out.push_str("# TYPE svc_queue_jobs gauge\n");
        out.push_str(&format!("svc_queue_jobs{{state=\"waiting\"}} {}\n", depth.waiting));
        out.push_str(&format!("svc_queue_jobs{{state=\"running\"}} {}\n", depth.running));
    }
    out
}
