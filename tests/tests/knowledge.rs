//! The knowledge pipeline end to end: the real `svc-api` persists revisions,
//! real `svc-worker` processes take them from Redis, and faults (a worker
//! killed, the queue flushed, Redis stopped) lose nothing.

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_tests::TestIssuer;
use svc_tests::stack::{Api, OwnRedis, Worker, admin, database_url, flush_namespace, migrate, namespace};

#[path = "knowledge/faults.rs"]
mod faults;
#[path = "knowledge/partitions.rs"]
mod partitions;
#[path = "knowledge/turns.rs"]
mod turns;

const REDIS: &str = "redis://127.0.0.1:6379";

/// A signed-up User with a Workspace (limits raised) and an Agent, over HTTP.
struct Tenant {
    token: String,
    workspace: String,
    agent: String,
}

async fn tenant(api: &Api, database: &str) -> Tenant {
    let subject = format!("e2e-{}", namespace());
    admin(database, &["user-setup", "--issuer", svc_tests::ISSUER, "--subject", &subject, "--email", "k@example.test"])
        .await;
    let token = TestIssuer::shared().token(&subject);
    let (status, created) = api.op("workspaces/create", &token, None, &json!({ "name": "Knowledge" })).await;
    assert_eq!(status, 200, "{created}");
    let workspace = created["data"]["workspace"]["id"].as_str().unwrap().to_owned();
    admin(database, &["plan-set", "--workspace", &workspace, "--plan", "pro"]).await;
    let (status, agent) = api.op("agents/create", &token, Some(&workspace), &json!({ "name": "Support" })).await;
    assert_eq!(status, 200, "{agent}");
    Tenant { token, workspace, agent: agent["data"]["agent"]["id"].as_str().unwrap().to_owned() }
}

/// A migrated database with the real API on it, its queue at `redis` under a
/// namespace of its own (`settings` besides), and a Tenant.
struct Stage {
    database: String,
    ns: String,
    api: Api,
    tenant: Tenant,
}

async fn stage(pool: &PgPool, redis: &str, settings: &[(&str, &str)]) -> Stage {
    let database = database_url(pool);
    migrate(&database).await;
    let ns = namespace();
    let mut env = vec![("SVC_QUEUE_NAMESPACE", ns.as_str()), ("REDIS_URL", redis)];
    env.extend_from_slice(settings);
    let api = Api::start(&database, &env).await;
    let tenant = tenant(&api, &database).await;
    Stage { database, ns, api, tenant }
}

fn content(i: usize) -> String {
    format!(
        "# Topic {i}\n\nSource number {i} explains how the office handles request {i}.\n\n{}",
        "More words. ".repeat(200)
    )
}

impl Tenant {
    /// Adds a source; returns its id (the answer's status must be 200).
    async fn add(&self, api: &Api, i: usize) -> String {
        let (status, body) = self.try_add(api, i).await;
        assert_eq!(status, 200, "{body}");
        body["data"]["knowledgeSource"]["id"].as_str().unwrap().to_owned()
    }

    async fn try_add(&self, api: &Api, i: usize) -> (u16, Value) {
        let mut input = self.submission(i, "v1", content(i));
        input["key"] = json!(format!("doc-{i}"));
        api.op("knowledge-sources/add", &self.token, Some(&self.workspace), &input).await
    }

    /// Replaces source `i` (`id`) with `text` as `revision` (the answer's status must be 200).
    async fn replace(&self, api: &Api, i: usize, id: &str, revision: &str, text: String) {
        let mut input = self.submission(i, revision, text);
        input["sourceId"] = json!(id);
        let (status, body) = api.op("knowledge-sources/replace", &self.token, Some(&self.workspace), &input).await;
        assert_eq!(status, 200, "{body}");
    }

    /// What add and replace submit for source `i`.
    fn submission(&self, i: usize, revision: &str, text: String) -> Value {
        json!({
            "agentId": self.agent, "title": format!("Doc {i}"),
            "provenance": { "kind": "repository", "uri": format!("docs/{i}.md") }, "revision": revision,
            "digest": svc_contract::digest::sha256_prefixed(text.as_bytes()), "content": text,
        })
    }

    /// Polls `wait` (as its `retryAfterMs` says) until every source is terminal,
    /// or `within` runs out; returns the sources' states.
    async fn wait_all(&self, api: &Api, sources: &[String], within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut states = Vec::new();
        for source in sources {
            loop {
                let input = json!({ "agentId": self.agent, "sourceId": source });
                let (status, body) = api.op("knowledge-sources/wait", &self.token, Some(&self.workspace), &input).await;
                assert_eq!(status, 200, "{body}");
                if body["data"]["terminal"] == true {
                    states.push(body["data"]["knowledgeSource"]["state"].as_str().unwrap().to_owned());
                    break;
                }
                assert!(Instant::now() < deadline, "{source} not done within {within:?}: {body}");
                let retry = body["data"]["retryAfterMs"].as_u64().unwrap();
                tokio::time::sleep(Duration::from_millis(retry.min(500))).await;
            }
        }
        states
    }
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Polls `sql`'s count every 10 ms, for up to 5 s, until `done` holds.
async fn count_until(pool: &PgPool, sql: &'static str, done: impl Fn(i64) -> bool) {
    for _ in 0..500 {
        if done(count(pool, sql).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every source active exactly once: one active revision each, and an index
/// whose passages and term counts belong to exactly those revisions.
async fn assert_promoted_once(pool: &PgPool, sources: usize) {
    let count = |sql| count(pool, sql);
    assert_eq!(count("SELECT count(*) FROM knowledge_revisions WHERE state = 'active'").await, sources as i64);
    assert_eq!(count("SELECT count(*) FROM knowledge_revisions WHERE state <> 'active'").await, 0);
    assert_eq!(
        count("SELECT count(*) FROM knowledge_passages").await,
        count("SELECT coalesce(sum(passages), 0)::bigint FROM knowledge_revisions").await,
        "each revision's passages written once"
    );
    assert_eq!(
        count("SELECT count(DISTINCT revision_id) FROM knowledge_passages").await,
        sources as i64,
        "passages only of the active revisions"
    );
    assert_eq!(svc_tests::knowledge::assert_sources_show_their_revisions(pool).await, sources);
}

#[sqlx::test(migrations = false)]
async fn a_worker_makes_added_sources_active(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let sources: Vec<String> = add_all(&tenant, &api, 5).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(30)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert_promoted_once(&pool, 5).await;
    // The worker's metrics count what it did; the API's report the backlog.
    let metrics = svc_tests::http::HttpClient::new(format!("http://{}", worker.metrics)).get("/metrics").await.text();
    assert!(metrics.contains("svc_worker_jobs_total{outcome=\"processed\"} 5"), "{metrics}");
    let ready = svc_tests::http::HttpClient::new(format!("http://{}", worker.metrics)).get("/readyz").await;
    assert_eq!(ready.status, 200);
    let api_metrics = api.client.get("/metrics").await.text();
    assert!(api_metrics.contains("svc_knowledge_backlog 0"), "{api_metrics}");
    // The wake-ups a first one made needless are taken within a few polls.
    let mut api_metrics = api_metrics;
    for _ in 0..100 {
        if api_metrics.contains("svc_queue_jobs{state=\"waiting\"} 0") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        api_metrics = api.client.get("/metrics").await.text();
    }
    assert!(api_metrics.contains("svc_queue_jobs{state=\"waiting\"} 0"), "{api_metrics}");
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}

/// Redis keeps a finished job's record for `SVC_KEEP_FINISHED_JOBS_SECS`, then
/// the sweep drops its payload, its metadata and its place in the done set:
/// Redis does not grow with every job ever run.
#[sqlx::test(migrations = false)]
async fn finished_jobs_leave_redis(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let settings = [("SVC_KEEP_FINISHED_JOBS_SECS", "1"), ("SVC_SWEEP_INTERVAL_SECS", "1")];
    let mut worker = Worker::start(&database, REDIS, &ns, &settings).await;
    let sources: Vec<String> = add_all(&tenant, &api, 5).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(30)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    let queue = format!("{ns}_jobs");
    let mut conn = redis::Client::open(REDIS).unwrap().get_multiplexed_async_connection().await.unwrap();
    // A job that failed once and waits for its retry (scheduled far ahead, so
    // no worker takes it): it is not finished, however old, and must stay.
    let waiting = "retrying-job";
    let _: () = redis::pipe()
        .hset(format!("{queue}:data"), waiting, "{}")
        .hset_multiple(format!("{queue}:meta:{waiting}"), &[("status", "Failed"), ("attempts", "1"), ("done_at", "1")])
        .zadd(format!("{queue}:scheduled"), waiting, 4_000_000_000u64)
        .query_async(&mut conn)
        .await
        .unwrap();
    // A bounded wait: a sweep a second drops records a second old.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let data: u64 = redis::cmd("HLEN").arg(format!("{queue}:data")).query_async(&mut conn).await.unwrap();
        let done: u64 = redis::cmd("SCARD").arg(format!("{queue}:done")).query_async(&mut conn).await.unwrap();
        let meta: Vec<String> = redis::cmd("KEYS").arg(format!("{queue}:meta:*")).query_async(&mut conn).await.unwrap();
        if (data, done, meta.len()) == (1, 0, 1) {
            break;
        }
        assert!(Instant::now() < deadline, "in Redis: {data} payloads, {done} done, {} metadata", meta.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(worker.process.logs().contains("vacuumed_jobs"), "{}", worker.process.logs());
    // The waiting job kept all of it.
    let kept: Option<String> =
        redis::cmd("HGET").arg(format!("{queue}:data")).arg(waiting).query_async(&mut conn).await.unwrap();
    assert_eq!(kept.as_deref(), Some("{}"));
    let status: Option<String> =
        redis::cmd("HGET").arg(format!("{queue}:meta:{waiting}")).arg("status").query_async(&mut conn).await.unwrap();
    assert_eq!(status.as_deref(), Some("Failed"));
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}

#[sqlx::test(migrations = false)]
async fn a_killed_worker_loses_nothing(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    // A slow worker (many big sources), killed while it holds some of them.
    let mut first = Worker::start(&database, REDIS, &ns, &[("SVC_WORKER_CONCURRENCY", "2")]).await;
    let sources: Vec<String> = add_all(&tenant, &api, 20).await;
    let processing = "SELECT count(*) FROM knowledge_revisions WHERE state = 'processing'";
    // Freeze the worker (SIGSTOP) the moment it holds work, and look again while
    // it cannot move: between two jobs it holds nothing, and a kill landing
    // there would test nothing. A statement it sent before it froze (a
    // promotion's COMMIT) still runs: the look waits until none of its
    // sessions is running one. Then SIGKILL it, frozen.
    let running = "SELECT count(*) FROM pg_stat_activity
                   WHERE application_name = 'svc-worker' AND datname = current_database() AND state = 'active'";
    for _ in 0..50 {
        count_until(&pool, processing, |n| n > 0).await;
        first.process.signal("STOP").await;
        count_until(&pool, running, |n| n == 0).await;
        if count(&pool, processing).await > 0 {
            break;
        }
        first.process.signal("CONT").await;
    }
    first.kill().await;
    let done = "SELECT count(*) FROM knowledge_revisions WHERE state = 'active'";
    let at_kill = count(&pool, done).await;
    let held = count(&pool, processing).await;
    eprintln!("killed with {at_kill} of 20 active and {held} processing");
    assert!(held > 0 && at_kill < 20, "the kill came while work was in flight");
    let restarted = Instant::now();
    let mut second = Worker::start(&database, REDIS, &ns, &[]).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(30)).await;
    eprintln!("every source active {:?} after the restart", restarted.elapsed());
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert_promoted_once(&pool, 20).await;
    assert!(second.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

#[sqlx::test(migrations = false)]
async fn the_sweeper_recovers_a_flushed_queue(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    // No worker yet: the jobs wait in Redis, and are lost with it.
    let sources: Vec<String> = add_all(&tenant, &api, 10).await;
    flush_namespace(REDIS, &ns).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(30)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert!(worker.process.logs().contains("requeued"), "{}", worker.process.logs());
    assert_promoted_once(&pool, 10).await;
    assert!(worker.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

/// Leaves one of the wake-ups waiting in `ns`'s queue (apalis-redis pushes
/// every job into its scheduled set, due now) and starts a worker with one
/// job slot and `settings`, its sweeper an hour away: whatever it processes,
/// that one wake-up and those it sends did.
async fn worker_with_one_wake_up(database: &str, ns: &str, settings: &[(&str, &str)]) -> Worker {
    let mut conn = redis::Client::open(REDIS).unwrap().get_multiplexed_async_connection().await.unwrap();
    let scheduled = format!("{ns}_jobs:scheduled");
    let _: () = redis::cmd("ZREMRANGEBYRANK").arg(&scheduled).arg(1).arg(-1).query_async(&mut conn).await.unwrap();
    let mut env = vec![("SVC_REQUEUE_AFTER_SECS", "3600"), ("SVC_WORKER_CONCURRENCY", "1")];
    env.extend_from_slice(settings);
    Worker::start(database, REDIS, ns, &env).await
}

/// Jobs only wake workers: the API sends no more wake-ups once 64 wait, and
/// one wake-up processes revisions until none is left, waking another every
/// 32 (its slot handed back): a single job left in the queue processes a
/// backlog of 80 without the sweeper, which waits an hour here.
#[sqlx::test(migrations = false)]
async fn one_wake_up_processes_a_backlog(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let sources: Vec<String> = add_all(&tenant, &api, 80).await;
    // apalis-redis pushes every job into its scheduled set (due now); a
    // worker's fetch moves them to the active list.
    let (active, scheduled) = (format!("{ns}_jobs:active"), format!("{ns}_jobs:scheduled"));
    let mut conn = redis::Client::open(REDIS).unwrap().get_multiplexed_async_connection().await.unwrap();
    let waiting: (u64, u64) = redis::pipe().llen(&active).zcard(&scheduled).query_async(&mut conn).await.unwrap();
    assert_eq!(waiting, (0, 64), "a wake-up for each add until 64 wait");
    let mut worker = worker_with_one_wake_up(&database, &ns, &[]).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(60)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert_promoted_once(&pool, 80).await;
    assert!(worker.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

/// A wake-up that meets an error it cannot get past (here a revision whose
/// passages PostgreSQL refuses, every attempt) wakes another before it ends:
/// the backlog behind that revision is processed, and the revision fails
/// once out of attempts, with one job in the queue and no sweeper.
#[sqlx::test(migrations = false)]
async fn a_wake_up_given_up_on_an_error_wakes_another(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.body LIKE '%POISON%' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT ON knowledge_passages
             FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut input = tenant.submission(99, "v1", "# Poison\n\nThis POISON text fails every attempt.".to_owned());
    input["key"] = json!("poison");
    let (status, body) = api.op("knowledge-sources/add", &tenant.token, Some(&tenant.workspace), &input).await;
    assert_eq!(status, 200, "{body}");
    let sources: Vec<String> = add_all(&tenant, &api, 30).await;
    let mut worker = worker_with_one_wake_up(&database, &ns, &[("SVC_MAX_ATTEMPTS", "2")]).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(60)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    let failed: (String, String) = sqlx::query_as(
        "SELECT candidate_state::text, candidate_error_code FROM knowledge_sources WHERE key = 'poison'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(failed, ("failed".to_owned(), "internal".to_owned()), "out of attempts");
    assert!(worker.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

#[sqlx::test(migrations = false)]
async fn adds_survive_a_redis_outage(pool: PgPool) {
    let mut redis = OwnRedis::start().await;
    let url = redis.url();
    let Stage { database, ns, api, tenant } = stage(&pool, &url, &[]).await;
    let mut worker = Worker::start(&database, &url, &ns, &[]).await;
    let mut accepted = Vec::new();
    accepted.push(tenant.add(&api, 0).await);
    redis.stop().await;
    // Redis is down: adds still answer, or refuse with 503 and write nothing.
    let mut refused = 0;
    for i in 1..8 {
        match tenant.try_add(&api, i).await {
            (200, body) => accepted.push(body["data"]["knowledgeSource"]["id"].as_str().unwrap().to_owned()),
            (503, _) => refused += 1,
            (status, body) => panic!("{status}: {body}"),
        }
    }
    eprintln!("during the outage: {} accepted, {refused} refused", accepted.len() - 1);
    let stored = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM knowledge_sources").fetch_one(&pool).await.unwrap();
    assert_eq!(stored as usize, accepted.len(), "nothing half-written ({refused} refused)");
    // The worker says at once that it is not ready.
    worker.process.wait_for("cannot reach Redis").await;
    redis.resume().await;
    let states = tenant.wait_all(&api, &accepted, Duration::from_secs(45)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert_promoted_once(&pool, accepted.len()).await;
    assert!(worker.process.terminate().await.success());
}

#[sqlx::test(migrations = false)]
async fn two_replicas_share_the_work(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let mut a = Worker::start(&database, REDIS, &ns, &[]).await;
    let mut b = Worker::start(&database, REDIS, &ns, &[]).await;
    let sources: Vec<String> = add_all(&tenant, &api, 50).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(60)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    assert_promoted_once(&pool, 50).await;
    for worker in [&mut a, &mut b] {
        let text = svc_tests::http::HttpClient::new(format!("http://{}", worker.metrics)).get("/metrics").await.text();
        assert!(text.contains("svc_worker_jobs_total{outcome=\"processed\"}"), "{text}");
    }
    assert!(a.process.terminate().await.success() && b.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

/// Replaces race two worker replicas (some failing, each superseding the last):
/// every snapshot taken meanwhile shows each source exactly as its revisions
/// hold, and each source ends active with its last revision, indexed once.
#[sqlx::test(migrations = false)]
async fn replaces_racing_two_replicas_keep_sources_showing_their_revisions(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let mut a = Worker::start(&database, REDIS, &ns, &[]).await;
    let mut b = Worker::start(&database, REDIS, &ns, &[]).await;
    let sources: Vec<String> = add_all(&tenant, &api, 10).await;
    let mut compared = 0;
    for round in 2..=5 {
        for (i, source) in sources.iter().enumerate() {
            // Whitespace fails processing (`empty_content`); the last round is valid.
            let text = if round < 5 && (i + round) % 3 == 0 { " \n\n ".to_owned() } else { content(100 * round + i) };
            tenant.replace(&api, i, source, &format!("v{round}"), text).await;
        }
        compared += svc_tests::knowledge::assert_sources_show_their_revisions(&pool).await;
    }
    assert_eq!(compared, 4 * sources.len());
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(60)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");
    let pool = &pool;
    let count = |sql| count(pool, sql);
    assert_eq!(count("SELECT count(*) FROM knowledge_revisions WHERE state = 'active'").await, 10);
    assert_eq!(
        count("SELECT count(*) FROM knowledge_sources WHERE revision = 'v5' AND active_revision = 'v5'").await,
        10
    );
    assert_eq!(
        count("SELECT count(DISTINCT revision_id) FROM knowledge_passages").await,
        10,
        "only the active revisions"
    );
    assert_eq!(svc_tests::knowledge::assert_sources_show_their_revisions(pool).await, 10);
    assert!(a.process.terminate().await.success() && b.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

#[sqlx::test(migrations = false)]
async fn a_worker_without_its_dependencies_is_not_ready_and_says_so(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    let nowhere = format!("redis://127.0.0.1:{}", svc_tests::process::free_port());
    let mut process = svc_tests::process::Spawned::start(
        "svc-worker",
        &[],
        &[
            ("DATABASE_URL", &database),
            ("REDIS_URL", &nowhere),
            ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
            ("RUST_LOG", "info"),
        ],
    );
    let started = Instant::now();
    process.wait_for("cannot reach Redis").await;
    assert!(started.elapsed() < Duration::from_secs(10), "said so at once");
    assert!(process.terminate().await.success(), "{}", process.logs());
}

/// Adds sources `0..n` one after another; returns their ids.
async fn add_all(tenant: &Tenant, api: &Api, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        ids.push(tenant.add(api, i).await);
    }
    ids
}

/// A 100-entry run: the worker is killed mid-run and started again; polling by
/// replay shows the checkpoint grow, then the run completes with every entry
/// applied exactly once.
#[sqlx::test(migrations = false)]
async fn a_reconcile_run_survives_a_killed_worker(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[]).await;
    let sources: Vec<Value> = (0..100)
        .map(|i| {
            let text = format!("{}\n\nEntry {i}.", content(i).repeat(20));
            json!({ "key": format!("kb-{i}"), "title": format!("KB {i}"),
                    "provenance": { "kind": "repository", "uri": format!("kb/{i}.md") }, "revision": "v1",
                    "digest": svc_contract::digest::sha256_prefixed(text.as_bytes()), "content": text })
        })
        .collect();
    let request = json!({ "agentId": tenant.agent, "manifest": { "version": 1, "sources": sources },
                          "dryRun": false, "idempotencyKey": "kb-sync-0001" });
    let replay = || api.op("knowledge-sources/reconcile", &tenant.token, Some(&tenant.workspace), &request);
    let (status, first) = replay().await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((first["data"]["status"].clone(), first["data"]["checkpoint"].clone()), (json!("applying"), json!(0)));

    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let checkpoint = "SELECT checkpoint FROM reconcile_runs";
    let mut seen = vec![0];
    loop {
        let at: i32 = sqlx::query_scalar(checkpoint).fetch_one(&pool).await.unwrap();
        if at > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.kill().await;
    let at_kill: i32 = sqlx::query_scalar(checkpoint).fetch_one(&pool).await.unwrap();
    eprintln!("killed at checkpoint {at_kill} of 100");
    assert!(at_kill < 100, "the kill came mid-run");
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let (status, body) = replay().await;
        assert_eq!(status, 200, "{body}");
        let at = body["data"]["checkpoint"].as_u64().unwrap();
        assert!(at >= *seen.last().unwrap() as u64, "the checkpoint never goes back: {seen:?} then {at}");
        seen.push(at as i32);
        if body["data"]["status"] == "completed" {
            break body;
        }
        assert!(Instant::now() < deadline, "not completed: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    seen.dedup();
    eprintln!("checkpoints seen by replay: {seen:?}");
    assert!(seen.len() > 2, "replays saw the run progress: {seen:?}");
    assert_eq!(done["data"]["checkpoint"], 100);
    let pool = &pool;
    let count = |sql| count(pool, sql);
    assert_eq!(count("SELECT count(*) FROM knowledge_sources").await, 100);
    assert_eq!(count("SELECT count(*) FROM knowledge_revisions").await, 100, "each entry applied once");
    assert_eq!(count("SELECT count(*) FROM reconcile_entries WHERE applied_action = 'add'").await, 100);
    assert!(worker.process.terminate().await.success());
    flush_namespace(REDIS, &ns).await;
}

/// The point of it all, with the real binaries: Knowledge a worker processed
/// answers the public on an allowed origin, within the per-client limit, and
/// `widget.verify` agrees.
#[sqlx::test(migrations = false)]
async fn the_public_gets_answers_from_processed_knowledge(pool: PgPool) {
    let Stage { database, ns, api, tenant } = stage(&pool, REDIS, &[("SVC_PUBLIC_ANSWERS_PER_MINUTE", "2")]).await;
    let mut worker = Worker::start(&database, REDIS, &ns, &[]).await;
    let sources = add_all(&tenant, &api, 3).await;
    let states = tenant.wait_all(&api, &sources, Duration::from_secs(30)).await;
    assert!(states.iter().all(|s| s == "active"), "{states:?}");

    let shop = "https://shop.example";
    let call = |path: &'static str, input: Value| {
        let (api, tenant) = (&api, &tenant);
        async move { api.op(path, &tenant.token, Some(&tenant.workspace), &input).await }
    };
    let (status, body) = call("public-chats/enable", json!({ "agentId": tenant.agent })).await;
    assert_eq!(status, 200, "{body}");
    let configuration = json!({ "agentId": tenant.agent, "configuration": { "allowedOrigins": [shop] } });
    assert_eq!(call("widgets/configure", configuration).await.0, 200);
    let (status, verified) = call("widgets/verify", json!({ "agentId": tenant.agent, "origin": shop })).await;
    assert_eq!(status, 200, "{verified}");

    let ask = || {
        let body = json!({ "question": "How does the office handle request 2?" }).to_string();
        let headers = [("origin", shop), ("content-type", "application/json")];
        let path = format!("/api/public/chat/{}/answers", tenant.agent);
        let client = api.client.clone();
        async move { client.send(hyper::Method::POST, &path, &headers, body).await }
    };
    let answered = ask().await;
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert_eq!(answered.header("access-control-allow-origin"), Some(shop));
    let body = answered.json();
    assert_eq!(body["sources"][0]["sourceId"], sources[2].as_str(), "{body}");
    assert!(body["answer"].as_str().unwrap().contains("request 2"), "{body}");
    // The connection's address is the client: its third question in a minute waits.
    assert_eq!(ask().await.status, 200);
    let limited = ask().await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    assert!(limited.header("retry-after").is_some());

    let page = api.client.get(&format!("/chat/{}", tenant.agent)).await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-security-policy").is_some_and(|csp| csp.contains("default-src 'none'")));
    assert!(worker.process.terminate().await.success(), "{}", worker.process.logs());
    flush_namespace(REDIS, &ns).await;
}
