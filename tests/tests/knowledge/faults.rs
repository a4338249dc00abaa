//! Database faults with the real binaries: sessions terminated under the API
//! and under a worker, and a worker frozen (SIGSTOP) while its transaction
//! holds locks; a worker stopped in the middle of a vacuum.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::PgPool;
use svc_tests::stack::{Worker, flush_namespace, terminate_sessions};

use super::{REDIS, Stage, Tenant, assert_promoted_once, stage};

/// Content of about 300 KB that names its source.
fn large(i: usize) -> String {
    let mut text = format!("# Manual {i}\n\n");
    let mut j = 0;
    while text.len() < 300_000 {
        text.push_str(&format!("Paragraph {j} of manual {i} explains step {j} in detail.\n\n"));
        j += 1;
    }
    text
}

impl Tenant {
    async fn add_large(&self, api: &svc_tests::stack::Api, i: usize) -> String {
        let mut input = self.submission(i, "v1", large(i));
        input["key"] = json!(format!("manual-{i}"));
        let (status, body) = api.op("knowledge-sources/add", &self.token, Some(&self.workspace), &input).await;
        assert_eq!(status, 200, "{body}");
        body["data"]["knowledgeSource"]["id"].as_str().unwrap().to_owned()
    }
}

/// Each source's active revision digest, by source.
async fn active_digests(pool: &PgPool) -> BTreeMap<String, (String, String)> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT s.key, r.id::text, r.digest FROM knowledge_sources s JOIN knowledge_revisions r ON r.id = s.active_revision_id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().map(|(key, id, digest)| (key, (id, digest))).collect()
}

/// What each source's active digest must be, by key.
fn expected_digests(n: usize) -> Vec<(String, String)> {
    let by_key: BTreeMap<String, String> =
        (0..n).map(|i| (format!("manual-{i}"), svc_contract::digest::sha256_prefixed(large(i).as_bytes()))).collect();
    by_key.into_iter().collect()
}

#[sqlx::test(migrations = false)]
async fn terminated_api_sessions_answer_200_or_503_never_500(pool: PgPool) {
    let Stage { api, tenant, ns, .. } = stage(&pool, REDIS, &[]).await;
    let api = std::sync::Arc::new(api);
    // Four readers call while the API's sessions are terminated three times,
    // each time after they got 500 more answers, and until 500 after the last.
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let mut readers = tokio::task::JoinSet::new();
    for reader in 0..4usize {
        let (api, token, ws, agent) =
            (api.clone(), tenant.token.clone(), tenant.workspace.clone(), tenant.agent.clone());
        let (answered, done) = (answered.clone(), done.clone());
        readers.spawn(async move {
            let mut statuses = Vec::new();
            let mut turn = reader;
            while !done.load(Ordering::Relaxed) {
                let (path, input) = if turn % 2 == 0 {
                    ("agents/inspect", json!({ "agentId": agent }))
                } else {
                    ("identity/status", json!({}))
                };
                let response = api
                    .client
                    .post_json(&format!("/api/public/operations/{path}"), Some(&token), Some(&ws), &input)
                    .await;
                statuses.push((response.status, response.headers.contains_key("retry-after")));
                answered.fetch_add(1, Ordering::Relaxed);
                turn += 1;
            }
            statuses
        });
    }
    let more_answers = async |count: usize| {
        let (from, deadline) = (answered.load(Ordering::Relaxed), Instant::now() + Duration::from_secs(60));
        while answered.load(Ordering::Relaxed) < from + count {
            assert!(Instant::now() < deadline, "the readers stopped getting answers");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let mut terminated = 0;
    for _ in 0..3 {
        more_answers(500).await;
        terminated += terminate_sessions(&pool, "svc-api").await;
    }
    more_answers(500).await;
    done.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    while let Some(statuses) = readers.join_next().await {
        all.extend(statuses.unwrap());
    }
    assert!(terminated >= 3, "sessions were terminated ({terminated})");
    let ok = all.iter().filter(|(status, _)| *status == 200).count();
    let wrong: Vec<_> = all.iter().filter(|(status, retry)| *status != 200 && !(*status == 503 && *retry)).collect();
    assert!(wrong.is_empty(), "only 200 or 503 with Retry-After: {wrong:?}");
    assert!(ok * 100 >= all.len() * 99, "at least 99% 200: {ok} of {}", all.len());
    // Idle sessions gone: the first call after the drops answers 200.
    terminate_sessions(&pool, "svc-api").await;
    let (status, body) =
        api.op("agents/inspect", &tenant.token, Some(&tenant.workspace), &json!({ "agentId": tenant.agent })).await;
    assert_eq!(status, 200, "{body}");
    let metrics = api.client.get("/metrics").await.text();
    assert!(!metrics.contains("svc_db_connection_lost_total 0\n"), "{metrics}");
    flush_namespace(REDIS, &ns).await;
}

#[sqlx::test(migrations = false)]
async fn processing_survives_its_sessions_being_terminated(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[("SVC_MAX_ATTEMPTS", "1")]).await;
    let mut sources = Vec::new();
    for i in 0..8 {
        sources.push(tenant.add_large(&api, i).await);
    }
    // Up to three times, the moment a revision is being processed, every
    // session of the worker is terminated.
    let processing = "SELECT count(*) FROM knowledge_revisions WHERE state = 'processing'";
    let unfinished = "SELECT count(*) FROM knowledge_revisions WHERE state <> 'active'";
    let (mut cuts, deadline) = (0, Instant::now() + Duration::from_secs(90));
    while cuts < 3 && super::count(&pool, unfinished).await > 0 {
        assert!(Instant::now() < deadline, "{}", worker.process.logs());
        if super::count(&pool, processing).await > 0 && terminate_sessions(&pool, "svc-worker").await > 0 {
            cuts += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(90)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}\n{}", worker.process.logs());
    assert!(cuts > 0, "the worker's sessions were terminated while it processed");
    assert_promoted_once(&pool, 8).await;
    let digests: Vec<(String, String)> = active_digests(&pool).await.into_iter().map(|(k, (_, d))| (k, d)).collect();
    assert_eq!(digests, expected_digests(8));
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}

/// Whether the frozen worker's session is inside a transaction that wrote.
async fn holds_a_writing_transaction(pool: &PgPool) -> bool {
    sqlx::query_scalar(
        "SELECT count(*) > 0 FROM pg_stat_activity
         WHERE application_name = 'svc-worker' AND datname = current_database() AND backend_xid IS NOT NULL",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_frozen_replica_neither_blocks_the_others_nor_overwrites_later(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let mut frozen = Worker::start(&database, REDIS, &ns, &[("SVC_WORKER_CONCURRENCY", "2")]).await;
    let mut sources = Vec::new();
    for i in 0..12 {
        sources.push(tenant.add_large(&api, i).await);
    }
    // Freeze it the moment it holds a transaction that wrote (its locks held).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "never caught the worker inside a transaction");
        if holds_a_writing_transaction(&pool).await {
            frozen.process.signal("STOP").await;
            if holds_a_writing_transaction(&pool).await {
                break;
            }
            frozen.process.signal("CONT").await;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Frozen for longer than its lease (3 s) while another replica takes over.
    let mut other = Worker::start(&database, REDIS, &ns, &[]).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(120)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}\n{}", other.process.logs());
    let before = active_digests(&pool).await;
    let digests: Vec<(String, String)> = before.iter().map(|(k, (_, d))| (k.clone(), d.clone())).collect();
    assert_eq!(digests, expected_digests(12), "the right content");
    assert_promoted_once(&pool, 12).await;

    // Thawed, the frozen replica finds its session and lease gone: nothing
    // changes. Stopped, it first finishes the attempts it had in flight, so
    // whatever it would write is written once it has exited.
    frozen.process.signal("CONT").await;
    assert!(frozen.process.terminate().await.success(), "{}", frozen.process.logs());
    assert_eq!(active_digests(&pool).await, before, "no older content overwrote a newer revision");
    assert_promoted_once(&pool, 12).await;
    assert!(other.process.terminate().await.success(), "{}", other.process.logs());
    flush_namespace(REDIS, &ns).await;
}

/// Polls `/readyz` until it answers `status`; how long that took, or `None`
/// after `within`.
async fn ready_becomes(client: &svc_tests::http::HttpClient, status: u16, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if client.get("/readyz").await.status == status {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// `/readyz` of the API and of a worker follows PostgreSQL and Redis: 503 while
/// either is cut off, 200 again within 5 s of its return, without a restart.
#[sqlx::test(migrations = false)]
async fn readiness_follows_the_database_and_redis(pool: PgPool) {
    use svc_tests::proxy::Proxy;
    let database = svc_tests::stack::database_url(&pool);
    svc_tests::stack::migrate(&database).await;
    let options = pool.connect_options();
    let postgres = Proxy::start(format!("{}:{}", options.get_host(), options.get_port()).parse().unwrap()).await;
    let redis = Proxy::start("127.0.0.1:6379".parse().unwrap()).await;
    let proxied_database = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        options.get_username(),
        postgres.port,
        options.get_database().unwrap()
    );
    let proxied_redis = format!("redis://127.0.0.1:{}", redis.port);
    let ns = svc_tests::stack::namespace();
    let api = svc_tests::stack::Api::start(
        &proxied_database,
        &[("REDIS_URL", proxied_redis.as_str()), ("SVC_QUEUE_NAMESPACE", ns.as_str())],
    )
    .await;
    let mut worker = Worker::start(&proxied_database, &proxied_redis, &ns, &[]).await;
    let worker_client = svc_tests::http::HttpClient::new(format!("http://{}", worker.metrics));
    let within = Duration::from_secs(10);
    for client in [&api.client, &worker_client] {
        assert!(ready_becomes(client, 200, within).await.is_some(), "ready at first");
    }
    for (name, proxy) in [("PostgreSQL", &postgres), ("Redis", &redis)] {
        proxy.cut();
        for client in [&api.client, &worker_client] {
            assert!(ready_becomes(client, 503, within).await.is_some(), "unready without {name}");
        }
        proxy.restore();
        for client in [&api.client, &worker_client] {
            let back = ready_becomes(client, 200, within).await;
            // The goal is 5 s; a loaded test machine is given a second more.
            assert!(back.is_some_and(|took| took <= Duration::from_secs(6)), "ready again after {name}: {back:?}");
        }
    }
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}

/// The worker's vacuums of the queue's table running now (not autovacuum's).
async fn vacuums(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = 'svc-worker' AND p.datname = current_database()
           AND p.relid = 'knowledge_revisions'::regclass",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_stopping_worker_does_not_wait_for_a_vacuum(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    sqlx::query("ALTER TABLE knowledge_revisions SET (autovacuum_enabled = false)").execute(&pool).await.unwrap();
    tenant.add(&api, 0).await;
    // 60,000 dead rows in the queue's table, and vacuums that crawl (they
    // sleep at every page): one lasts minutes.
    sqlx::query(
        "INSERT INTO knowledge_revisions
         SELECT (jsonb_populate_record(NULL::knowledge_revisions,
                 to_jsonb(r) || jsonb_build_object('id', gen_random_uuid()))).*
         FROM (SELECT * FROM knowledge_revisions LIMIT 1) r, generate_series(1, 60000) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "DELETE FROM knowledge_revisions r
         WHERE NOT EXISTS (SELECT 1 FROM knowledge_sources s WHERE s.latest_revision_id = r.id)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "DO $$ BEGIN
             EXECUTE format('ALTER DATABASE %I SET vacuum_cost_delay = 100', current_database());
             EXECUTE format('ALTER DATABASE %I SET vacuum_cost_limit = 1', current_database());
         END $$",
    )
    .execute(&pool)
    .await
    .unwrap();
    let settings = &[("SVC_VACUUM_INTERVAL_SECS", "1"), ("SVC_ANALYZE_INTERVAL_SECS", "0")];
    let mut worker = Worker::start(&database, REDIS, &ns, settings).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while vacuums(&pool).await == 0 {
        assert!(Instant::now() < deadline, "the worker never vacuumed:\n{}", worker.process.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    assert_eq!(vacuums(&pool).await, 1, "the worker left without waiting; PostgreSQL goes on alone");
    terminate_sessions(&pool, "svc-worker").await;
    flush_namespace(REDIS, &ns).await;
}
