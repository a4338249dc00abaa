//! Liveness, readiness and metrics endpoints.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use svc_core::metrics::Scrape;
use svc_core::runtime;

use crate::app::AppState;

const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The process is alive.
pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// The database is reachable and migrated for this binary, and Redis is
/// reachable, each within `runtime::READY_TIMEOUT`: 200, else 503 naming what
/// is not (`unreachable`, or the database's `unmigrated` or `behind`).
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (database, redis) =
        tokio::join!(runtime::check_database(state.service.pool()), runtime::check_redis(&state.redis));
    let database = match database {
        Ok(schema) => schema.as_str(),
        Err(error) => {
            tracing::warn!(%error, "not ready: PostgreSQL unreachable");
            "unreachable"
        }
    };
    let redis = match redis {
        Ok(()) => "ok",
        Err(error) => {
            tracing::warn!(%error, "not ready: Redis unreachable");
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

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut scrape = Scrape::default();
    crate::metrics::pool_figures(&mut scrape, state.service.pool(), state.service.warm_connections());
    scrape.gauge(
        "svc_workspace_gate_waiting",
        "Limit-consuming writes waiting for a turn at their Workspace's gate",
        i64::try_from(state.service.gate_waiting()).unwrap_or(i64::MAX),
    );
    queue_figures(&state, &mut scrape).await;
    wait_cache_figures(&state, &mut scrape);
    caller_cache_figures(&state, &mut scrape);
    vector_cache_figures(&state, &mut scrape);
    ([(header::CONTENT_TYPE, svc_core::metrics::CONTENT_TYPE)], state.metrics.render(scrape))
}

/// How often `knowledge_source.wait` was answered without reading PostgreSQL.
fn wait_cache_figures(state: &AppState, scrape: &mut Scrape) {
    let Some(figures) = state.service.wait_cache_figures() else { return };
    scrape.counters(
        "svc_wait_cache_lookups",
        "knowledge_source.wait answers looked up in this process's cache",
        "result",
        &[("hit", figures.hits), ("miss", figures.misses)],
    );
    scrape.gauge(
        "svc_wait_cache_entries",
        "Answers kept; 0 while not hearing source changes from PostgreSQL",
        i64::try_from(figures.entries).unwrap_or(i64::MAX),
    );
    scrape.gauge(
        "svc_wait_cache_listening",
        "1 while this process hears source changes from PostgreSQL",
        i64::from(figures.live),
    );
}

/// How often a request was authenticated without reading PostgreSQL.
fn caller_cache_figures(state: &AppState, scrape: &mut Scrape) {
    let Some(figures) = state.service.caller_cache_figures() else { return };
    scrape.counters(
        "svc_caller_cache_lookups",
        "Authenticated callers looked up in this process's cache",
        "result",
        &[("hit", figures.hits), ("miss", figures.misses)],
    );
    scrape.gauge(
        "svc_caller_cache_entries",
        "Callers kept; 0 while not hearing changes from PostgreSQL",
        i64::try_from(figures.entries).unwrap_or(i64::MAX),
    );
    scrape.gauge(
        "svc_caller_cache_listening",
        "1 while this process hears changes of keys, Users, memberships and Workspaces from PostgreSQL",
        i64::from(figures.live),
    );
}

/// The Agents' vectors this process keeps, and how often a question found
/// them kept.
fn vector_cache_figures(state: &AppState, scrape: &mut Scrape) {
    let Some(meaning) = state.service.meaning() else { return };
    let figures = meaning.cache.figures();
    scrape.counters(
        "svc_vector_cache_lookups",
        "Blocks of vectors a question looked up in this process's cache",
        "result",
        &[("hit", figures.hits), ("miss", figures.misses)],
    );
    scrape.gauge(
        "svc_vector_cache_bytes",
        "Bytes of vectors kept (at most svc_vector_cache_max_bytes)",
        i64::try_from(figures.bytes).unwrap_or(i64::MAX),
    );
    scrape.gauge(
        "svc_vector_cache_max_bytes",
        "The most bytes of vectors this process keeps (SVC_VECTOR_CACHE_MB)",
        i64::try_from(figures.max_bytes).unwrap_or(i64::MAX),
    );
}

/// The knowledge backlog from PostgreSQL (what is left to do, whatever Redis
/// holds) and the queue from Redis; a figure that cannot be read is left out.
async fn queue_figures(state: &AppState, scrape: &mut Scrape) {
    let backlog = tokio::time::timeout(CHECK_TIMEOUT, state.service.backlog_figures()).await;
    if let Ok(Ok(pending)) = backlog {
        scrape.gauge("svc_knowledge_backlog", "Revisions pending or processing", pending.revisions);
        scrape.gauge(
            "svc_knowledge_pending_workspaces",
            "Workspaces with revisions pending or processing",
            pending.workspaces,
        );
        scrape.gauge_f64(
            "svc_knowledge_oldest_pending_seconds",
            "Age of the oldest revision still to process",
            pending.oldest_secs,
        );
    }
    if let Some(queue) = state.service.queue()
        && let Ok(depth) = queue.depth().await
    {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        scrape.gauges(
            "svc_queue_jobs",
            "Jobs in the Redis queue, waiting or claimed by a worker",
            "state",
            &[("waiting", count(depth.waiting)), ("running", count(depth.running))],
        );
    }
}
