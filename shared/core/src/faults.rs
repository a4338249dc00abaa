//! Counts of database and queue faults in this process, for `/metrics`: an
//! operator sees a flapping database, or Redis gone, as these move.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

static CONNECTIONS_LOST: AtomicU64 = AtomicU64::new(0);
static BREAKERS_OPEN: AtomicI64 = AtomicI64::new(0);
static BREAKER_TRIPS: AtomicU64 = AtomicU64::new(0);
static RETRIES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// What was tried again after a transient database fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// A call (or its authentication) on a fresh connection.
    Request,
    /// A step of background work (a job's attempt, a sweep).
    Work,
}

impl Retry {
    fn label(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Work => "work",
        }
    }
}

/// A database connection was found dead (terminated, reset, timed out idle).
pub fn connection_lost() {
    CONNECTIONS_LOST.fetch_add(1, Relaxed);
}

/// Something was tried again after a transient fault.
pub fn retried(what: Retry) {
    RETRIES[what as usize].fetch_add(1, Relaxed);
}

/// How many times `what` was tried again so far in this process.
pub fn retries(what: Retry) -> u64 {
    RETRIES[what as usize].load(Relaxed)
}

/// The queue's circuit breaker opened (a push to Redis failed).
pub fn queue_breaker_opened() {
    BREAKERS_OPEN.fetch_add(1, Relaxed);
    BREAKER_TRIPS.fetch_add(1, Relaxed);
}

/// The queue's circuit breaker closed (Redis answers again).
pub fn queue_breaker_closed() {
    BREAKERS_OPEN.fetch_sub(1, Relaxed);
}

/// The counters in the Prometheus text format.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str(
        "# HELP svc_db_connection_lost_total Database connections found dead (terminated, reset, closed by a proxy).\n",
    );
    out.push_str("# TYPE svc_db_connection_lost_total counter\n");
    out.push_str(&format!("svc_db_connection_lost_total {}\n", CONNECTIONS_LOST.load(Relaxed)));
    out.push_str("# HELP svc_db_retries_total Calls and work steps tried again after a transient database fault.\n");
    out.push_str("# TYPE svc_db_retries_total counter\n");
    for what in [Retry::Request, Retry::Work] {
        out.push_str(&format!(
            "svc_db_retries_total{{path=\"{}\"}} {}\n",
            what.label(),
            RETRIES[what as usize].load(Relaxed)
        ));
    }
    out.push_str("# HELP svc_queue_breaker_open 1 while pushes to Redis fail at once (a push failed; a probe waits for Redis).\n");
    out.push_str("# TYPE svc_queue_breaker_open gauge\n");
    out.push_str(&format!("svc_queue_breaker_open {}\n", BREAKERS_OPEN.load(Relaxed).min(1)));
    out.push_str("# HELP svc_queue_breaker_trips_total Times a failed push to Redis opened the queue's breaker.\n");
    out.push_str("# TYPE svc_queue_breaker_trips_total counter\n");
    out.push_str(&format!("svc_queue_breaker_trips_total {}\n", BREAKER_TRIPS.load(Relaxed)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_their_labels() {
        connection_lost();
        retried(Retry::Work);
        let text = render();
        assert!(text.contains("# TYPE svc_db_connection_lost_total counter"));
        assert!(text.lines().any(|l| l.starts_with("svc_db_connection_lost_total ") && !l.ends_with(" 0")));
        assert!(text.lines().any(|l| l.starts_with("svc_db_retries_total{path=\"work\"} ") && !l.ends_with(" 0")));
        assert!(text.contains("svc_db_retries_total{path=\"request\"}"));
        assert!(text.contains("# TYPE svc_queue_breaker_open gauge\nsvc_queue_breaker_open "), "{text}");
        assert!(text.contains("svc_queue_breaker_trips_total "), "{text}");
    }
}
