//! The API's Prometheus metrics: calls and latency per surface, operation and
//! outcome, and every response by surface and status class, in the process's
//! one registry (`svc_core::metrics`), beside svc-core's own families and the
//! figures read at each scrape.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use svc_contract::catalog::CATALOG;
use svc_contract::{Operation, ProblemCode};
use svc_core::metrics::{Registry, Scrape};

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
        // leaves it out of the exposition.
        let outcome_labels = |outcome| [labels[0], labels[1], ("outcome", outcome)];
        match outcome {
            None => ok.get_or_init(|| self.calls.get_or_create(&outcome_labels("ok")).clone()).inc(),
            Some(code) => self.calls.get_or_create(&outcome_labels(code.as_str())).inc(),
        };
        duration.observe(elapsed.as_secs_f64());
    }

    /// The exposition: every family of the process, then `scrape`'s figures.
    pub fn render(&self, scrape: Scrape) -> String {
        self.registry.render(scrape)
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
        let text = metrics.render(Scrape::default());
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
        let text = metrics.render(Scrape::default());
        assert!(
            text.contains(r#"svc_operation_calls_total{surface="http",operation="agent.list",outcome="workspace_selection_required"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"outcome="ok""#), "a success series before any success: {text}");
    }

    #[test]
    fn one_registry_holds_the_cores_families_and_the_scrapes_figures() {
        let mut scrape = Scrape::default();
        scrape.gauge("svc_knowledge_backlog", "Revisions pending or processing", 3);
        let metrics = Metrics::default();
        metrics.responses.record("http", 200, Duration::from_millis(1));
        let text = metrics.render(scrape);
        for family in [
            "svc_http_responses_total",
            "svc_db_connection_lost_total",
            "svc_db_retries_total",
            "svc_knowledge_backlog",
        ] {
            assert_eq!(text.matches(&format!("# TYPE {family} ")).count(), 1, "{family} once in {text}");
        }
    }
}
