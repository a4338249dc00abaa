//! The worker's Prometheus metrics: jobs by outcome and processing time.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

const OUTCOMES: [(JobOutcome, &str); 4] = [
    (JobOutcome::Processed, "processed"),
    (JobOutcome::Failed, "failed"),
    (JobOutcome::Retried, "retried"),
    (JobOutcome::Skipped, "skipped"),
];

#[derive(Default)]
pub struct Metrics {
    jobs: [AtomicU64; 4],
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
    requeued: AtomicU64,
    timed_out: AtomicU64,
}

impl Metrics {
    pub fn job(&self, outcome: JobOutcome, took: Duration) {
        let index = OUTCOMES.iter().position(|(o, _)| *o == outcome).unwrap_or(0);
        self.jobs[index].fetch_add(1, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        if let Some(bucket) = BUCKETS.iter().position(|le| seconds <= *le) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn swept(&self, requeued: usize, timed_out: usize) {
        self.requeued.fetch_add(requeued as u64, Ordering::Relaxed);
        self.timed_out.fetch_add(timed_out as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self, ready: bool) -> String {
        let mut out = String::new();
        out.push_str("# HELP svc_worker_jobs_total Jobs by outcome.\n# TYPE svc_worker_jobs_total counter\n");
        for ((_, name), counter) in OUTCOMES.iter().zip(&self.jobs) {
            let _ = writeln!(out, "svc_worker_jobs_total{{outcome=\"{name}\"}} {}", counter.load(Ordering::Relaxed));
        }
        out.push_str("# HELP svc_worker_job_duration_seconds Time to run a job.\n");
        out.push_str("# TYPE svc_worker_job_duration_seconds histogram\n");
        let mut cumulative = 0;
        for (le, bucket) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "svc_worker_job_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "svc_worker_job_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ =
            writeln!(out, "svc_worker_job_duration_seconds_sum {}", self.micros.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "svc_worker_job_duration_seconds_count {count}");
        out.push_str("# HELP svc_worker_sweeper_requeued_total Jobs the sweeper sent again.\n");
        out.push_str("# TYPE svc_worker_sweeper_requeued_total counter\n");
        let _ = writeln!(out, "svc_worker_sweeper_requeued_total {}", self.requeued.load(Ordering::Relaxed));
        out.push_str("# HELP svc_worker_sweeper_timed_out_total Revisions failed past the processing deadline.\n");
        out.push_str("# TYPE svc_worker_sweeper_timed_out_total counter\n");
        let _ = writeln!(out, "svc_worker_sweeper_timed_out_total {}", self.timed_out.load(Ordering::Relaxed));
        out.push_str(
            "# HELP svc_worker_ready Whether PostgreSQL and Redis are reachable.\n# TYPE svc_worker_ready gauge\n",
        );
        let _ = writeln!(out, "svc_worker_ready {}", u8::from(ready));
        out
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
        assert!(text.contains("svc_worker_job_duration_seconds_bucket{le=\"0.1\"} 2"));
        assert!(text.contains("svc_worker_job_duration_seconds_bucket{le=\"5\"} 3"));
        assert!(text.contains("svc_worker_job_duration_seconds_count 3"));
        assert!(text.contains("svc_worker_ready 1"));
    }
}
