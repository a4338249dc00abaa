//! Every response of the API by surface and status class, and its time: what
//! the 5xx-ratio alert and the public answers' panels read (operation calls
//! alone miss the public chat and failures before an operation is known).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::BUCKETS;

/// The access log's surfaces, with public answers apart from the chat page.
const SURFACES: [&str; 6] = ["http", "mcp", "answers", "public", "health", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[derive(Default)]
struct Series {
    classes: [AtomicU64; CLASSES.len()],
    buckets: [AtomicU64; BUCKETS.len()],
    micros_sum: AtomicU64,
}

pub struct Responses {
    series: [Series; SURFACES.len()],
}

impl Default for Responses {
    fn default() -> Self {
        Self { series: std::array::from_fn(|_| Series::default()) }
    }
}

/// The surface a response is counted under: the access log's, except that a
/// question to the public chat (`POST /api/public/chat/{agent}/answers`) is
/// `answers`, not the page's `public`.
pub fn surface_of(log_surface: &str, method: &http::Method, path: &str) -> &'static str {
    if log_surface == "public" && method == http::Method::POST && path.ends_with("/answers") {
        return "answers";
    }
    SURFACES.iter().find(|s| **s == log_surface).copied().unwrap_or("other")
}

impl Responses {
    pub fn record(&self, surface: &str, status: u16, elapsed: Duration) {
        let index = SURFACES.iter().position(|s| *s == surface).unwrap_or(SURFACES.len() - 1);
        let series = &self.series[index];
        let class = usize::from(status / 100).clamp(1, CLASSES.len()) - 1;
        series.classes[class].fetch_add(1, Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        if let Some(bucket) = BUCKETS.iter().position(|le| seconds <= *le) {
            series.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        series.micros_sum.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// The text exposition: both families always (their help and type), a
    /// series once it has seen a response.
    pub fn render(&self, out: &mut String) {
        out.push_str("# HELP svc_http_responses_total Responses by surface and status class.\n");
        out.push_str("# TYPE svc_http_responses_total counter\n");
        let mut histograms = String::new();
        histograms.push_str("# HELP svc_http_response_duration_seconds Time from request to response, by surface.\n");
        histograms.push_str("# TYPE svc_http_response_duration_seconds histogram\n");
        for (surface, series) in SURFACES.iter().zip(&self.series) {
            let mut total = 0;
            for (class, counter) in CLASSES.iter().zip(&series.classes) {
                let count = counter.load(Ordering::Relaxed);
                if count > 0 {
                    total += count;
                    let _ =
                        writeln!(out, "svc_http_responses_total{{surface=\"{surface}\",class=\"{class}\"}} {count}");
                }
            }
            if total == 0 {
                continue;
            }
            let mut cumulative = 0;
            for (le, bucket) in BUCKETS.iter().zip(&series.buckets) {
                cumulative += bucket.load(Ordering::Relaxed);
                let _ = writeln!(
                    histograms,
                    "svc_http_response_duration_seconds_bucket{{surface=\"{surface}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                histograms,
                "svc_http_response_duration_seconds_bucket{{surface=\"{surface}\",le=\"+Inf\"}} {total}"
            );
            let sum = series.micros_sum.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(histograms, "svc_http_response_duration_seconds_sum{{surface=\"{surface}\"}} {sum}");
            let _ = writeln!(histograms, "svc_http_response_duration_seconds_count{{surface=\"{surface}\"}} {total}");
        }
        out.push_str(&histograms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_counted_by_surface_and_class() {
        let responses = Responses::default();
        responses.record("answers", 200, Duration::from_millis(3));
        responses.record("answers", 503, Duration::from_millis(30));
        responses.record("http", 404, Duration::from_millis(1));
        let mut text = String::new();
        responses.render(&mut text);
        assert!(text.contains("svc_http_responses_total{surface=\"answers\",class=\"2xx\"} 1"), "{text}");
        assert!(text.contains("svc_http_responses_total{surface=\"answers\",class=\"5xx\"} 1"), "{text}");
        assert!(text.contains("svc_http_responses_total{surface=\"http\",class=\"4xx\"} 1"), "{text}");
        assert!(text.contains("svc_http_response_duration_seconds_bucket{surface=\"answers\",le=\"0.005\"} 1"));
        assert!(text.contains("svc_http_response_duration_seconds_count{surface=\"answers\"} 2"));
        assert!(!text.contains("surface=\"mcp\""), "no series before a response: {text}");
    }

    #[test]
    fn public_questions_are_answers_and_the_page_is_not() {
        let post = http::Method::POST;
        assert_eq!(surface_of("public", &post, "/api/public/chat/agt_1/answers"), "answers");
        assert_eq!(surface_of("public", &http::Method::GET, "/chat/agt_1"), "public");
        assert_eq!(surface_of("public", &http::Method::OPTIONS, "/api/public/chat/agt_1/answers"), "public");
        assert_eq!(surface_of("http", &post, "/api/public/operations/agents/create"), "http");
    }
}
