//! Prometheus metrics: calls and latency per surface, operation and outcome.
//!
//! The label space is small and fixed (2 surfaces x 30 operations x 16
//! outcomes), so the counters are plain atomics in arrays: recording is a few
//! relaxed increments, with no lock and no allocation on the request path.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use svc_contract::{CATALOG, ProblemCode};

mod responses;
pub use responses::surface_of;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    Http,
    Mcp,
}

const SURFACES: [(Surface, &str); 2] = [(Surface::Http, "http"), (Surface::Mcp, "mcp")];
/// `ok` and the fifteen problem codes.
const OUTCOMES: usize = 1 + ProblemCode::ALL.len();
/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default)]
struct Series {
    outcomes: [AtomicU64; OUTCOMES],
    buckets: [AtomicU64; BUCKETS.len()],
    micros_sum: AtomicU64,
}

pub struct Metrics {
    series: Vec<Series>,
    /// Every response, by surface and status class.
    pub responses: responses::Responses,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            series: (0..SURFACES.len() * CATALOG.len()).map(|_| Series::default()).collect(),
            responses: responses::Responses::default(),
        }
    }
}

fn outcome_index(outcome: Option<ProblemCode>) -> usize {
    match outcome {
        None => 0,
        Some(code) => 1 + ProblemCode::ALL.iter().position(|c| *c == code).unwrap_or(0),
    }
}

impl Metrics {
    /// Records one call: `outcome` is `None` for success, else the problem code.
    pub fn record(
        &self,
        surface: Surface,
        operation: &svc_contract::Operation,
        outcome: Option<ProblemCode>,
        elapsed: Duration,
    ) {
        let surface_index = surface as usize;
        let series = &self.series[surface_index * CATALOG.len() + operation.op as usize];
        series.outcomes[outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        if let Some(bucket) = BUCKETS.iter().position(|le| seconds <= *le) {
            series.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        series.micros_sum.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every series that has seen a call.
    pub fn render(&self, pool: &sqlx::PgPool) -> String {
        let mut out = String::new();
        out.push_str("# HELP svc_operation_calls_total Operation calls by surface, operation and outcome.\n");
        out.push_str("# TYPE svc_operation_calls_total counter\n");
        let mut histograms = String::new();
        histograms.push_str("# HELP svc_operation_duration_seconds Time to answer an operation call.\n");
        histograms.push_str("# TYPE svc_operation_duration_seconds histogram\n");
        for (surface, surface_name) in SURFACES {
            for op in &CATALOG {
                let series = &self.series[surface as usize * CATALOG.len() + op.op as usize];
                let labels = format!("surface=\"{surface_name}\",operation=\"{}\"", op.id);
                let mut total = 0;
                for (i, counter) in series.outcomes.iter().enumerate() {
                    let count = counter.load(Ordering::Relaxed);
                    if count == 0 {
                        continue;
                    }
                    total += count;
                    let outcome = if i == 0 { "ok" } else { ProblemCode::ALL[i - 1].as_str() };
                    let _ = writeln!(out, "svc_operation_calls_total{{{labels},outcome=\"{outcome}\"}} {count}");
                }
                if total == 0 {
                    continue;
                }
                let mut cumulative = 0;
                for (le, bucket) in BUCKETS.iter().zip(&series.buckets) {
                    cumulative += bucket.load(Ordering::Relaxed);
                    let _ = writeln!(
                        histograms,
                        "svc_operation_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                    );
                }
                let _ = writeln!(histograms, "svc_operation_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {total}");
                let sum = series.micros_sum.load(Ordering::Relaxed) as f64 / 1e6;
                let _ = writeln!(histograms, "svc_operation_duration_seconds_sum{{{labels}}} {sum}");
                let _ = writeln!(histograms, "svc_operation_duration_seconds_count{{{labels}}} {total}");
            }
        }
        out.push_str(&histograms);
        self.responses.render(&mut out);
        let idle = pool.num_idle() as u64;
        let size = u64::from(pool.size());
        out.push_str("# HELP svc_db_connections Database pool connections by state.\n");
        out.push_str("# TYPE svc_db_connections gauge\n");
        let _ = writeln!(out, "svc_db_connections{{state=\"idle\"}} {idle}");
        let _ = writeln!(out, "svc_db_connections{{state=\"in_use\"}} {}", size.saturating_sub(idle));
        out
    }
}
