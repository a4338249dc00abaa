//! The worker's Prometheus metrics: jobs by outcome and processing time, the
//! sweeper's work and readiness, in the process's one registry
//! (`svc_core::metrics`) beside svc-core's own families and the knowledge
//! tables' upkeep.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use svc_core::metrics::{Registry, Scrape};

/// Upper bounds of the processing-time buckets, in seconds.
const BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// The revision became active (or the run advanced).
    Processed,
    /// The work failed for good (the revision is failed).
    Failed,
    /// A transient error: the job will run again.
    Retried,
    /// Nothing to do (done already, held by another worker, superseded).
    Skipped,
}

impl JobOutcome {
    const ALL: [Self; 4] = [Self::Processed, Self::Failed, Self::Retried, Self::Skipped];

    fn as_str(self) -> &'static str {
        match self {
            Self::Processed => "processed",
            Self::Failed => "failed",
            Self::Retried => "retried",
            Self::Skipped => "skipped",
        }
    }
}

pub struct Metrics {
    registry: Registry,
    jobs: Family<[(&'static str, &'static str); 1], Counter>,
    durations: Histogram,
    requeued: Counter,
    timed_out: Counter,
    ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        svc_core::knowledge::statistics::register(&mut registry);
        let jobs = Family::<[(&'static str, &'static str); 1], Counter>::default();
        // Every outcome from the start, at 0: rates need a first sample.
        for outcome in JobOutcome::ALL {
            let _ = jobs.get_or_create(&[("outcome", outcome.as_str())]);
        }
        registry.register("svc_worker_jobs", "Jobs by outcome", jobs.clone());
        let durations = Histogram::new(BUCKETS);
        registry.register("svc_worker_job_duration_seconds", "Time to run a job", durations.clone());
        let requeued = Counter::default();
        registry.register("svc_worker_sweeper_requeued", "Jobs the sweeper sent again", requeued.clone());
        let timed_out = Counter::default();
        registry.register(
            "svc_worker_sweeper_timed_out",
            "Revisions failed past the processing deadline",
            timed_out.clone(),
        );
        let ready = Gauge::default();
        registry.register("svc_worker_ready", "Whether PostgreSQL and Redis are reachable", ready.clone());
        Self { registry, jobs, durations, requeued, timed_out, ready }
    }
}

impl Metrics {
    pub fn job(&self, outcome: JobOutcome, took: Duration) {
        self.jobs.get_or_create(&[("outcome", outcome.as_str())]).inc();
        self.durations.observe(took.as_secs_f64());
    }

    /// A job's outcome learned after the job itself was gone (an attempt cut
    /// short and settled in the background): counted, with no duration.
    pub fn counted(&self, outcome: JobOutcome) {
        self.jobs.get_or_create(&[("outcome", outcome.as_str())]).inc();
    }

    pub fn swept(&self, requeued: usize, timed_out: usize) {
        self.requeued.inc_by(requeued as u64);
        self.timed_out.inc_by(timed_out as u64);
    }

    /// The exposition, with readiness as of now.
    pub fn render(&self, ready: bool) -> String {
        self.ready.set(i64::from(ready));
        self.registry.render(Scrape::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_counted_by_outcome_and_time() {
        let metrics = Metrics::default();
        metrics.job(JobOutcome::Processed, Duration::from_millis(80));
        metrics.job(JobOutcome::Processed, Duration::from_secs(3));
        metrics.job(JobOutcome::Retried, Duration::from_millis(1));
        let text = metrics.render(true);
        assert!(text.contains("svc_worker_jobs_total{outcome=\"processed\"} 2"), "{text}");
        assert!(text.contains("svc_worker_jobs_total{outcome=\"retried\"} 1"));
        assert!(text.contains("svc_worker_jobs_total{outcome=\"failed\"} 0"), "every outcome from the start");
        assert!(text.contains("svc_worker_job_duration_seconds_bucket{le=\"0.1\"} 2"));
        assert!(text.contains("svc_worker_job_duration_seconds_bucket{le=\"5\"} 3"));
        assert!(text.contains("svc_worker_job_duration_seconds_count 3"));
        assert!(text.contains("svc_worker_ready 1"));
    }

    #[test]
    fn one_registry_holds_the_cores_families_too() {
        let text = Metrics::default().render(false);
        for family in ["svc_db_connection_lost_total", "svc_queue_breaker_open", "svc_knowledge_analyzed_total"] {
            assert_eq!(text.matches(&format!("# TYPE {family} ")).count(), 1, "{family} once in {text}");
        }
    }
}
