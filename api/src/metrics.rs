//! Prometheus metrics: calls and latency per surface, operation and outcome,
//! and every response by surface and status class; encoded by
//! `prometheus-client` (the Prometheus project's Rust client) in the
//! Prometheus text format (0.0.4), the names and labels as before it.
//!
//! Counters and histograms live for the process in one registry; figures read
//! at scrape time (the pool, the backlog, the queue, the wait cache) go into
//! a registry of that scrape (`Scrape`), so a figure that cannot be read is
//! left out rather than shown stale.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use svc_contract::catalog::CATALOG;
use svc_contract::{Operation, ProblemCode};

mod kept;
mod responses;
pub use responses::surface_of;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    Http,
    Mcp,
}

const CALL_SURFACES: usize = 2;

impl Surface {
    fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Mcp => "mcp",
        }
    }
}

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

type CallLabels = [(&'static str, &'static str); 3];
type OperationLabels = [(&'static str, &'static str); 2];
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Histograms<OperationLabels>,
    /// Per surface and operation: its successful calls (once there is one)
    /// and its durations.
    kept: kept::Kept<(OnceLock<Counter>, Histogram)>,
    /// Every response, by surface and status class.
    pub responses: responses::Responses,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register("svc_operation_calls", "Operation calls by surface, operation and outcome", calls.clone());
        let durations: Histograms<OperationLabels> = Family::new_with_constructor(latency_histogram);
        registry.register("svc_operation_duration_seconds", "Time to answer an operation call", durations.clone());
        let responses = responses::Responses::new(&mut registry);
        let kept = kept::Kept::new(CALL_SURFACES * CATALOG.len());
        Self { registry, calls, durations, kept, responses }
    }
}

impl Metrics {
    /// Records one call: `outcome` is `None` for success, else the problem code.
    pub fn record(&self, surface: Surface, operation: &Operation, outcome: Option<ProblemCode>, elapsed: Duration) {
        let labels = [("surface", surface.as_str()), ("operation", operation.id)];
        let series = self.kept.get(surface as usize * CATALOG.len() + operation.op as usize, || {
            (OnceLock::new(), self.durations.get_or_create(&labels).clone())
        });
        let (ok, duration) = &*series;
        // The success series is made by the first success: a failure first
        // leaves it out of the exposition, as before it was kept.
        let outcome_labels = |outcome| [labels[0], labels[1], ("outcome", outcome)];
        match outcome {
            None => ok.get_or_init(|| self.calls.get_or_create(&outcome_labels("ok")).clone()).inc(),
            Some(code) => self.calls.get_or_create(&outcome_labels(code.as_str())).inc(),
        };
        duration.observe(elapsed.as_secs_f64());
    }

    /// The exposition: this process's counters and histograms, then the
    /// figures of this scrape.
    pub fn render(&self, scrape: &Scrape) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; an encoding error would leave the
        // text cut short, which a scraper reports.
        let _ = encode(&mut out, &self.registry).and_then(|()| encode(&mut out, &scrape.registry));
        out
    }
}

/// Figures read for one scrape.
#[derive(Default)]
pub struct Scrape {
    registry: Registry,
}

impl Scrape {
    pub fn gauge(&mut self, name: &str, help: &str, value: i64) {
        let gauge = Gauge::<i64>::default();
        gauge.set(value);
        self.registry.register(name, help, gauge);
    }

    pub fn gauge_f64(&mut self, name: &str, help: &str, value: f64) {
        let gauge = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        gauge.set(value);
        self.registry.register(name, help, gauge);
    }

    /// A gauge with one label, a value per label value.
    pub fn gauges(&mut self, name: &str, help: &str, label: &'static str, values: &[(&'static str, i64)]) {
        let family = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        for (value_of_label, value) in values {
            family.get_or_create(&[(label, *value_of_label)]).set(*value);
        }
        self.registry.register(name, help, family);
    }

    /// A counter kept elsewhere (its total so far), with one label. `name`
    /// without `_total`: the encoder adds it.
    pub fn counters(&mut self, name: &str, help: &str, label: &'static str, values: &[(&'static str, u64)]) {
        let family = Family::<[(&'static str, &'static str); 1], Counter>::default();
        for (value_of_label, value) in values {
            family.get_or_create(&[(label, *value_of_label)]).inc_by(*value);
        }
        self.registry.register(name, help, family);
    }
}

/// The pool's connections by state: `warm` ones are kept for the next
/// request (`svc_core::runtime::warm`), which the pool counts in use.
pub fn pool_figures(scrape: &mut Scrape, pool: &sqlx::PgPool, warm: usize) {
    let idle = pool.num_idle() as i64;
    let warm = warm as i64;
    let size = i64::from(pool.size());
    scrape.gauges(
        "svc_db_connections",
        "Database pool connections by state",
        "state",
        &[("idle", idle), ("warm", warm), ("in_use", (size - idle - warm).max(0))],
    );
}

#[cfg(test)]
mod tests {
    use svc_contract::OperationId;

    use super::*;

    #[test]
    fn kept_series_count_in_the_exposition_beside_failures() {
        let metrics = Metrics::default();
        let inspect = OperationId::AgentInspect.operation();
        let millis = Duration::from_millis;
        metrics.record(Surface::Http, inspect, None, millis(1));
        metrics.record(Surface::Http, inspect, Some(ProblemCode::ResourceNotFound), millis(2));
        metrics.record(Surface::Http, inspect, None, millis(30));
        metrics.record(Surface::Mcp, inspect, None, millis(1));
        let text = metrics.render(&Scrape::default());
        for line in [
            r#"svc_operation_calls_total{surface="http",operation="agent.inspect",outcome="ok"} 2"#,
            r#"svc_operation_calls_total{surface="http",operation="agent.inspect",outcome="resource_not_found"} 1"#,
            r#"svc_operation_calls_total{surface="mcp",operation="agent.inspect",outcome="ok"} 1"#,
            r#"svc_operation_duration_seconds_count{surface="http",operation="agent.inspect"} 3"#,
            r#"svc_operation_duration_seconds_bucket{surface="http",operation="agent.inspect",le="0.01"} 2"#,
            r#"svc_operation_duration_seconds_count{surface="mcp",operation="agent.inspect"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("agent.list"), "no series before a call: {text}");
    }

    #[test]
    fn a_first_failure_makes_no_success_series() {
        let metrics = Metrics::default();
        let list = OperationId::AgentList.operation();
        metrics.record(Surface::Http, list, Some(ProblemCode::WorkspaceSelectionRequired), Duration::from_millis(1));
        let text = metrics.render(&Scrape::default());
        assert!(
            text.contains(r#"svc_operation_calls_total{surface="http",operation="agent.list",outcome="workspace_selection_required"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"outcome="ok""#), "a success series before any success: {text}");
    }
}
