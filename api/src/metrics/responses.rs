//! Every response of the API by surface and status class, and its time: what
//! the 5xx-ratio alert and the public answers' panels read (operation calls
//! alone miss the public chat and failures before an operation is known).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use svc_core::metrics::Registry;

use super::kept::Kept;
use super::{Histograms, latency_histogram};

/// The access log's surfaces, with public answers apart from the chat page.
const SURFACES: [&str; 6] = ["http", "mcp", "answers", "public", "health", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

pub struct Responses {
    counts: Family<[(&'static str, &'static str); 2], Counter>,
    durations: Histograms<[(&'static str, &'static str); 1]>,
    /// Per surface and class: its count and the surface's durations.
    kept: Kept<(Counter, Histogram)>,
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
    pub(super) fn new(registry: &mut Registry) -> Self {
        let counts = Family::default();
        registry.register("svc_http_responses", "Responses by surface and status class", counts.clone());
        let durations: Histograms<_> = Family::new_with_constructor(latency_histogram);
        registry.register(
            "svc_http_response_duration_seconds",
            "Time from request to response, by surface",
            durations.clone(),
        );
        Self { counts, durations, kept: Kept::new(SURFACES.len() * CLASSES.len()) }
    }

    pub fn record(&self, surface: &'static str, status: u16, elapsed: Duration) {
        let class = usize::from(status / 100).clamp(1, CLASSES.len()) - 1;
        // A surface not in the list is counted all the same, only not kept.
        let slot = SURFACES.iter().position(|s| *s == surface).map_or(usize::MAX, |s| s * CLASSES.len() + class);
        let series = self.kept.get(slot, || {
            let count = self.counts.get_or_create(&[("surface", surface), ("class", CLASSES[class])]).clone();
            (count, self.durations.get_or_create(&[("surface", surface)]).clone())
        });
        let (count, duration) = &*series;
        count.inc();
        duration.observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_core::metrics::Scrape;

    use crate::metrics::Metrics;

    #[test]
    fn responses_are_counted_by_surface_and_class() {
        let metrics = Metrics::default();
        metrics.responses.record("answers", 200, Duration::from_millis(3));
        metrics.responses.record("answers", 503, Duration::from_millis(30));
        metrics.responses.record("http", 404, Duration::from_millis(1));
        let text = metrics.render(Scrape::default());
        assert!(text.contains("svc_http_responses_total{surface=\"answers\",class=\"2xx\"} 1"), "{text}");
        assert!(text.contains("svc_http_responses_total{surface=\"answers\",class=\"5xx\"} 1"), "{text}");
        assert!(text.contains("svc_http_responses_total{surface=\"http\",class=\"4xx\"} 1"), "{text}");
        assert!(
            text.contains("svc_http_response_duration_seconds_bucket{surface=\"answers\",le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(text.contains("svc_http_response_duration_seconds_count{surface=\"answers\"} 2"), "{text}");
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
