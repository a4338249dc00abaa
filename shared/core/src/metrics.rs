//! The Prometheus metrics of a process: one registry, built here, that
//! `svc-api` and `svc-worker` each make once at start-up and encode whole on
//! `/metrics` in the Prometheus text format (0.0.4), by `prometheus-client`
//! (the Prometheus project's Rust client).
//!
//! The registry starts with svc-core's own families (the database and queue
//! faults, [`crate::faults`]); a process adds its own with
//! [`Registry::register`] before it serves. Counters and histograms live for
//! the process; figures read when scraped (the pool, the backlog, the queue,
//! the caches) come with each scrape ([`Scrape`]) through one collector in the
//! registry, so a figure that cannot be read is left out rather than shown
//! stale.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Metric;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// The metrics of one process.
pub struct Registry {
    registry: prometheus_client::registry::Registry,
    scraped: Arc<Scraped>,
    /// One encoding at a time: a scrape's figures stay in place while the
    /// registry is encoded with them.
    rendering: Mutex<()>,
}

impl Default for Registry {
    fn default() -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        crate::faults::register(&mut registry);
        let scraped = Arc::new(Scraped::default());
        registry.register_collector(Box::new(scraped.clone()));
        Self { registry, scraped, rendering: Mutex::new(()) }
    }
}

impl Registry {
    /// Adds a family of this process. `help` without a final period (the
    /// encoder adds one); a counter's `name` without `_total` (likewise).
    pub fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.registry.register(name, help, metric);
    }

    /// The exposition: every family of the process, then `scrape`'s figures.
    pub fn render(&self, scrape: Scrape) -> String {
        let _one_at_a_time = self.rendering.lock().unwrap_or_else(PoisonError::into_inner);
        *self.scraped.figures.lock().unwrap_or_else(PoisonError::into_inner) = scrape.figures;
        let mut out = String::new();
        // Writing to a String cannot fail; an encoding error would leave the
        // text cut short, which a scraper reports.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// A value read for one scrape.
#[derive(Clone, Copy, Debug)]
enum Value {
    Gauge(i64),
    GaugeF64(f64),
    /// The total so far of a counter kept elsewhere.
    Counter(u64),
}

impl Value {
    fn metric_type(self) -> MetricType {
        match self {
            Self::Gauge(_) | Self::GaugeF64(_) => MetricType::Gauge,
            Self::Counter(_) => MetricType::Counter,
        }
    }

    fn encode(self, encoder: MetricEncoder<'_>) -> std::fmt::Result {
        match self {
            Self::Gauge(value) => ConstGauge::new(value).encode(encoder),
            Self::GaugeF64(value) => ConstGauge::new(value).encode(encoder),
            Self::Counter(value) => ConstCounter::new(value).encode(encoder),
        }
    }
}

/// One family read for one scrape: a value, or a value per value of one label.
#[derive(Debug)]
struct Figure {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    values: Values,
}

#[derive(Debug)]
enum Values {
    One(Value),
    ByLabel(&'static str, Vec<(&'static str, Value)>),
}

/// Figures read for one scrape, in the order they are shown.
#[derive(Debug, Default)]
pub struct Scrape {
    figures: Vec<Figure>,
}

impl Scrape {
    fn push(&mut self, name: &'static str, help: &'static str, values: Values) {
        let kind = match &values {
            Values::One(value) => value.metric_type(),
            Values::ByLabel(_, values) => values.first().map_or(MetricType::Gauge, |(_, v)| v.metric_type()),
        };
        self.figures.push(Figure { name, help, kind, values });
    }

    pub fn gauge(&mut self, name: &'static str, help: &'static str, value: i64) {
        self.push(name, help, Values::One(Value::Gauge(value)));
    }

    pub fn gauge_f64(&mut self, name: &'static str, help: &'static str, value: f64) {
        self.push(name, help, Values::One(Value::GaugeF64(value)));
    }

    /// A gauge with one label, a value per label value.
    pub fn gauges(
        &mut self,
        name: &'static str,
        help: &'static str,
        label: &'static str,
        values: &[(&'static str, i64)],
    ) {
        let values = values.iter().map(|(of_label, value)| (*of_label, Value::Gauge(*value))).collect();
        self.push(name, help, Values::ByLabel(label, values));
    }

    /// A counter kept elsewhere (its total so far), with one label. `name`
    /// without `_total`: the encoder adds it.
    pub fn counters(
        &mut self,
        name: &'static str,
        help: &'static str,
        label: &'static str,
        values: &[(&'static str, u64)],
    ) {
        let values = values.iter().map(|(of_label, value)| (*of_label, Value::Counter(*value))).collect();
        self.push(name, help, Values::ByLabel(label, values));
    }
}

/// The figures of the scrape being encoded, as the registry's collector.
#[derive(Debug, Default)]
struct Scraped {
    figures: Mutex<Vec<Figure>>,
}

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let figures = self.figures.lock().unwrap_or_else(PoisonError::into_inner);
        for figure in figures.iter() {
            // The period the registry adds to the help of the families it holds.
            let help = format!("{}.", figure.help);
            let mut metric = encoder.encode_descriptor(figure.name, &help, None, figure.kind)?;
            match &figure.values {
                Values::One(value) => value.encode(metric)?,
                Values::ByLabel(label, values) => {
                    for (of_label, value) in values {
                        value.encode(metric.encode_family(&[(*label, *of_label)])?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{self, Retry};

    /// The fault counters of [`crate::faults`], as every process serves them.
    #[test]
    fn counters_render_with_their_labels() {
        faults::connection_lost();
        faults::retried(Retry::Work);
        let text = Registry::default().render(Scrape::default());
        assert!(text.contains("# TYPE svc_db_connection_lost_total counter"));
        assert!(text.lines().any(|l| l.starts_with("svc_db_connection_lost_total ") && !l.ends_with(" 0")));
        assert!(text.lines().any(|l| l.starts_with("svc_db_retries_total{path=\"work\"} ") && !l.ends_with(" 0")));
        assert!(text.contains("svc_db_retries_total{path=\"request\"}"));
        assert!(text.contains("# TYPE svc_queue_breaker_open gauge\nsvc_queue_breaker_open "), "{text}");
        assert!(text.contains("svc_queue_breaker_trips_total "), "{text}");
    }

    #[test]
    fn open_breakers_show_as_one() {
        let open = || {
            let text = Registry::default().render(Scrape::default());
            text.lines().find_map(|l| l.strip_prefix("svc_queue_breaker_open ")).map(str::to_owned)
        };
        faults::queue_breaker_opened();
        faults::queue_breaker_opened();
        assert_eq!(open().as_deref(), Some("1"));
        faults::queue_breaker_closed();
        faults::queue_breaker_closed();
    }

    #[test]
    fn one_registry_holds_the_faults_and_each_scrapes_figures() {
        let registry = Registry::default();
        let mut scrape = Scrape::default();
        scrape.gauge("svc_test_backlog", "Revisions pending", 7);
        scrape.gauge_f64("svc_test_oldest_seconds", "Age of the oldest", 1.5);
        scrape.gauges("svc_test_connections", "Connections by state", "state", &[("idle", 2), ("in_use", 1)]);
        scrape.counters("svc_test_lookups", "Lookups", "result", &[("hit", 3), ("miss", 4)]);
        let text = registry.render(scrape);
        for line in [
            "# TYPE svc_db_connection_lost_total counter",
            "# TYPE svc_db_retries_total counter",
            "# TYPE svc_queue_breaker_open gauge",
            "# TYPE svc_queue_breaker_trips_total counter",
            "# HELP svc_test_backlog Revisions pending.",
            "# TYPE svc_test_backlog gauge\nsvc_test_backlog 7\n",
            "svc_test_oldest_seconds 1.5\n",
            "svc_test_connections{state=\"idle\"} 2\nsvc_test_connections{state=\"in_use\"} 1\n",
            "# TYPE svc_test_lookups_total counter\n",
            "svc_test_lookups_total{result=\"hit\"} 3\nsvc_test_lookups_total{result=\"miss\"} 4\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        // A scrape's figures are its own: the next scrape shows only its own.
        let text = registry.render(Scrape::default());
        assert!(!text.contains("svc_test_"), "{text}");
        assert!(text.contains("svc_db_connection_lost_total "), "{text}");
    }
}
