//! deploy/ reads only metrics the real processes export: every `svc_*` name
//! that the Grafana dashboard, the alerts or the workers' autoscaler query is
//! on the `/metrics` of a running `svc-api` or `svc-worker`.

use std::collections::BTreeSet;
use std::path::Path;

use sqlx::PgPool;
use svc_tests::http::HttpClient;
use svc_tests::stack::{Api, Worker, database_url, flush_namespace, migrate, namespace};

const REDIS: &str = "redis://127.0.0.1:6379";

/// The files whose queries name metrics.
const READERS: [&str; 3] = [
    "deploy/grafana/svc.json",
    "deploy/kubernetes/components/monitoring/alerts.yaml",
    "deploy/kubernetes/components/autoscaling/worker-scaledobject.yaml",
];

/// Every `svc_...` word (lower case: settings are `SVC_...`) in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut names = BTreeSet::new();
    for (start, _) in text.match_indices("svc_") {
        if text[..start].chars().next_back().is_some_and(word) {
            continue;
        }
        let end = text[start..].find(|c: char| !word(c)).map_or(text.len(), |n| start + n);
        names.insert(text[start..end].to_owned());
    }
    names
}

/// The sample names an exposition can show: each sample line's name, and for
/// each declared family the names its type gives samples (a histogram's
/// `_bucket`, `_sum`, `_count`; a counter's `_total` in OpenMetrics).
fn exported(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else { continue };
            names.insert(name.to_owned());
            let suffixes: &[&str] = match kind {
                "histogram" => &["_bucket", "_sum", "_count"],
                "counter" => &["_total"],
                _ => &[],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

#[test]
fn names_are_read_as_whole_words() {
    let names = metric_names(r#"rate(svc_a_total{x="SVC_B"}[5m]) / my_svc_c + max(svc_d)"#);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["svc_a_total", "svc_d"]);
    let shown = exported("# TYPE svc_h histogram\n# TYPE svc_c counter\nsvc_g{a=\"1\"} 2\nsvc_i 3\n");
    for name in ["svc_h_bucket", "svc_h_count", "svc_c_total", "svc_g", "svc_i"] {
        assert!(shown.contains(name), "{name} in {shown:?}");
    }
}

#[sqlx::test(migrations = false)]
async fn dashboards_alerts_and_autoscaling_read_metrics_that_exist(pool: PgPool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut wanted = BTreeSet::new();
    for file in READERS {
        let names = metric_names(&std::fs::read_to_string(root.join(file)).unwrap());
        assert!(!names.is_empty(), "{file} names no metric");
        wanted.extend(names);
    }
    // The reading above finds what matters (else the check below is empty).
    for name in ["svc_knowledge_backlog", "svc_worker_ready", "svc_http_responses_total", "svc_queue_jobs"] {
        assert!(wanted.contains(name), "{name} in {wanted:?}");
    }

    let database = database_url(&pool);
    migrate(&database).await;
    let ns = namespace();
    let api = Api::start(&database, &[("SVC_QUEUE_NAMESPACE", ns.as_str()), ("REDIS_URL", REDIS)]).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let worker_client = HttpClient::new(format!("http://{}", worker.metrics));
    // Requests before the scrape, so the series of responses and of
    // operation calls exist (a family is shown once it has one).
    assert_eq!(api.client.get("/readyz").await.status, 200);
    let (status, _) = api.op("identity/status", "not-a-token", None, &serde_json::json!({})).await;
    assert_eq!(status, 401);
    let mut shown = exported(&api.client.get("/metrics").await.text());
    shown.extend(exported(&worker_client.get("/metrics").await.text()));

    let missing: Vec<&String> = wanted.iter().filter(|name| !shown.contains(*name)).collect();
    assert!(missing.is_empty(), "read by deploy/ but exported by neither process: {missing:?}\nexported: {shown:?}");
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}
