//! Counts of database and queue faults in this process, for `/metrics`: an
//! operator sees a flapping database, or Redis gone, as these move.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// This process's counts, registered in its registry ([`register`]).
struct Faults {
    connections_lost: Counter,
    retries: Family<[(&'static str, &'static str); 1], Counter>,
    /// The series of `retries`, by [`Retry`].
    retried: [Counter; 2],
    breakers_open: BreakersOpen,
    breaker_trips: Counter,
}

static FAULTS: LazyLock<Faults> = LazyLock::new(|| {
    let retries = Family::<[(&'static str, &'static str); 1], Counter>::default();
    let retried = [Retry::Request, Retry::Work].map(|what| retries.get_or_create(&[("path", what.label())]).clone());
    Faults {
        connections_lost: Counter::default(),
        retries,
        retried,
        breakers_open: BreakersOpen::default(),
        breaker_trips: Counter::default(),
    }
});

/// Queue breakers open in this process, shown as 1 while any is.
#[derive(Clone, Debug, Default)]
struct BreakersOpen(std::sync::Arc<AtomicI64>);

impl EncodeMetric for BreakersOpen {
    fn encode(&self, mut encoder: MetricEncoder) -> std::fmt::Result {
        encoder.encode_gauge(&self.0.load(Relaxed).min(1))
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

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
    FAULTS.connections_lost.inc();
}

/// Something was tried again after a transient fault.
pub fn retried(what: Retry) {
    FAULTS.retried[what as usize].inc();
}

/// How many times `what` was tried again so far in this process.
pub fn retries(what: Retry) -> u64 {
    FAULTS.retried[what as usize].get()
}

/// The queue's circuit breaker opened (a push to Redis failed).
pub fn queue_breaker_opened() {
    FAULTS.breakers_open.0.fetch_add(1, Relaxed);
    FAULTS.breaker_trips.inc();
}

/// The queue's circuit breaker closed (Redis answers again).
pub fn queue_breaker_closed() {
    FAULTS.breakers_open.0.fetch_sub(1, Relaxed);
}

/// Adds these counts to a process's registry ([`crate::metrics::Registry`]).
pub(crate) fn register(registry: &mut Registry) {
    let faults = &*FAULTS;
    registry.register(
        "svc_db_connection_lost",
        "Database connections found dead (terminated, reset, closed by a proxy)",
        faults.connections_lost.clone(),
    );
    registry.register(
        "svc_db_retries",
        "Calls and work steps tried again after a transient database fault",
        faults.retries.clone(),
    );
    registry.register(
        "svc_queue_breaker_open",
        "1 while pushes to Redis fail at once (a push failed; a probe waits for Redis)",
        faults.breakers_open.clone(),
    );
    registry.register(
        "svc_queue_breaker_trips",
        "Times a failed push to Redis opened the queue's breaker",
        faults.breaker_trips.clone(),
    );
}
