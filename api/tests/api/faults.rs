//! Faults of the database connection: sessions terminated by PostgreSQL (as a
//! failover, a pooler restart or a proxy's idle timeout does) answer 503 with
//! `Retry-After`, never 500; reads are retried on a fresh connection; dead
//! connections never serve a later call; and the worker's processing gets past
//! contention and lost connections without spending its attempts.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::ids::RevisionId;
use svc_core::knowledge::{OnSettled, Outcome, Processing, Settled, process, take_next};
use svc_core::runtime::{Timeouts, connect};

use crate::helpers::{Tenant, TestApp, TestUser, assert_ok, config};
use crate::knowledge::add_input;

/// The name the API's connections carry in `pg_stat_activity`.
const APPLICATION: &str = "svc-api-faults";

fn url_of(pool: &PgPool) -> String {
    let o = pool.connect_options();
    format!("postgres://{}@{}:{}/{}", o.get_username(), o.get_host(), o.get_port(), o.get_database().unwrap())
}

/// The API over a pool made as `svc-api serve` makes it (its checks included),
/// with a Tenant.
async fn tenant(pool: &PgPool, timeouts: Timeouts) -> Tenant {
    let own = connect(&url_of(pool), APPLICATION, 5, timeouts).unwrap();
    Tenant::with_config(own, config()).await
}

/// Terminates every backend of the API's pool; returns how many.
async fn terminate_all(admin: &PgPool) -> i64 {
    svc_tests::stack::terminate_sessions(admin, APPLICATION).await
}

/// Every answer of one kind: its status, and whether a 503 said when to retry.
#[derive(Default)]
struct Tally {
    ok: usize,
    unavailable_with_retry: usize,
    other: Vec<(u16, String)>,
}

impl Tally {
    fn record(&mut self, status: u16, retry_after: bool, body: String) {
        match (status, retry_after) {
            (200, _) => self.ok += 1,
            (503, true) => self.unavailable_with_retry += 1,
            _ => self.other.push((status, body)),
        }
    }

    fn total(&self) -> usize {
        self.ok + self.unavailable_with_retry + self.other.len()
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn terminated_sessions_never_answer_500_and_reads_see_200(pool: PgPool) {
    let s = tenant(&pool, Timeouts::SERVING).await;
    let added = s.ok("knowledge-sources/add", add_input(&s.agent, "faq", "Opening hours: nine to five.")).await;
    let source = added["knowledgeSource"]["id"].as_str().unwrap().to_owned();
    let (_, key) = s.app.api_key(&s.owner, &s.ws, json!({ "name": "reader", "preset": "read_only" })).await;

    // Four readers loop while every backend is terminated three times, each
    // time after they got 1,000 more answers, and until 1,000 after the last.
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let done = tokio_util::sync::CancellationToken::new();
    let mut readers = tokio::task::JoinSet::new();
    for reader in 0..4 {
        let (app, token, ws, agent, source, key) =
            (s.app.clone(), s.owner.token.clone(), s.ws.clone(), s.agent.clone(), source.clone(), key.clone());
        let (answered, done) = (answered.clone(), done.clone());
        readers.spawn(async move {
            let mut tally = Tally::default();
            let mut turn = reader;
            while !done.is_cancelled() {
                let response = match turn % 3 {
                    0 => app.op("agents/inspect", &token, Some(&ws), json!({ "agentId": agent })).await,
                    1 => {
                        app.op("knowledge-sources/wait", &key, None, json!({ "agentId": agent, "sourceId": source }))
                            .await
                    }
                    _ => app.op("identity/status", &token, None, json!({})).await,
                };
                let retry_after = response.headers.contains_key("retry-after");
                tally.record(response.status, retry_after, response.text());
                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                turn += 1;
            }
            tally
        });
    }
    let more_answers = async |count: usize| {
        let (from, deadline) =
            (answered.load(std::sync::atomic::Ordering::Relaxed), Instant::now() + Duration::from_secs(60));
        while answered.load(std::sync::atomic::Ordering::Relaxed) < from + count {
            assert!(Instant::now() < deadline, "the readers stopped getting answers");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let mut terminated = 0;
    for _ in 0..3 {
        more_answers(1_000).await;
        terminated += terminate_all(&pool).await;
    }
    more_answers(1_000).await;
    done.cancel();
    let mut all = Tally::default();
    while let Some(tally) = readers.join_next().await {
        let tally = tally.unwrap();
        all.ok += tally.ok;
        all.unavailable_with_retry += tally.unavailable_with_retry;
        all.other.extend(tally.other);
    }
    assert!(terminated >= 3, "backends were terminated ({terminated})");
    assert!(all.other.is_empty(), "only 200 or 503 with Retry-After: {:?}", &all.other[..all.other.len().min(3)]);
    assert!(all.ok * 100 >= all.total() * 99, "at least 99% 200: {} of {}", all.ok, all.total());

    // Idle connections terminated while nobody called (their backends gone):
    // the first calls after the drops, a mutation among them, answer 200.
    let gone = format!(
        "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = '{APPLICATION}' AND datname = current_database()"
    );
    for (path, input) in [
        ("agents/inspect", json!({ "agentId": s.agent })),
        ("agents/create", json!({ "name": "After the drops" })),
        ("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": source })),
    ] {
        terminate_all(&pool).await;
        until(&pool, &gone).await;
        assert_ok(path, &s.call(path, input).await);
    }
    assert!(s.app.metric("svc_db_connection_lost_total").await >= 1.0);
    assert!(s.app.metric("svc_db_retries_total{path=\"request\"}").await >= 1.0);
}

/// A mutation whose session ends inside its transaction answers 503 with
/// `Retry-After` (HTTP) or `retryAfterSeconds` (an MCP tool result), never 500;
/// retried with its idempotency key it is applied once.
#[sqlx::test(migrations = "../migrations")]
async fn a_mutation_cut_off_mid_transaction_answers_503_and_applies_once_on_retry(pool: PgPool) {
    let s = tenant(&pool, Timeouts::SERVING).await;
    let cut = |app: TestApp, user: TestUser, ws: String, agent: String, mcp: bool| {
        let pool = pool.clone();
        async move {
            // Hold the Workspace's usage row: the create waits inside its transaction.
            let holder = hold_usage(&pool).await;
            let call = tokio::spawn(async move {
                let input = cut_input(&agent);
                if mcp {
                    app.tool(&user.token, Some(&ws), "svc_knowledge_source_add", input).await
                } else {
                    app.op("knowledge-sources/add", &user.token, Some(&ws), input).await
                }
            });
            let waiting = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'";
            let mut killed = false;
            for _ in 0..500 {
                if let Some(pid) =
                    sqlx::query_scalar::<_, i32>(waiting).bind(APPLICATION).fetch_optional(&pool).await.unwrap()
                {
                    sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&pool).await.unwrap();
                    killed = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let response = call.await.unwrap();
            assert!(killed, "the add waited on the lock: {}", response.text());
            holder.rollback().await.unwrap();
            response
        }
    };
    let http = cut(s.app.clone(), s.owner.clone(), s.ws.clone(), s.agent.clone(), false).await;
    assert_eq!(http.status, 503, "{}", http.text());
    assert!(http.headers.contains_key("retry-after"));
    assert_eq!(http.json()["error"]["details"]["retryAfterSeconds"], 5);

    let mcp = cut(s.app.clone(), s.owner.clone(), s.ws.clone(), s.agent.clone(), true).await;
    assert_eq!(mcp.status, 200, "a tool result: {}", mcp.text());
    let result = &mcp.json()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["error"]["code"], "internal_error");
    assert_eq!(result["structuredContent"]["error"]["details"]["retryAfterSeconds"], 5);

    // The client retries with the same key: one Agent, whatever the first try did.
    assert_ok("knowledge-sources/add", &s.call("knowledge-sources/add", cut_input(&s.agent)).await);
    let sources: i64 =
        sqlx::query_scalar("SELECT count(*) FROM knowledge_sources WHERE key = 'cut'").fetch_one(&pool).await.unwrap();
    assert_eq!(sources, 1);
}

/// An add without an idempotency key is one statement outside a transaction
/// once its Workspace has room on the usage shards: a session ending while
/// that statement waits leaves its outcome unknown, so the add runs again in
/// a transaction on a fresh connection, which would find the source had the
/// statement written it. Added once, answered 200.
#[sqlx::test(migrations = "../migrations")]
async fn an_add_cut_off_in_its_own_statement_is_added_once(pool: PgPool) {
    let s = tenant(&pool, Timeouts::SERVING).await;
    s.ok("knowledge-sources/add", add_input(&s.agent, "one", "The first source.")).await;
    let mut holder = pool_begin(&pool).await;
    sqlx::query("SELECT 1 FROM workspaces FOR UPDATE").execute(&mut *holder).await.unwrap();
    let add = s.spawn_call("knowledge-sources/add", add_input(&s.agent, "cut", "Cut off in its own statement."));
    let waiting = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'
                   AND query LIKE '%INSERT INTO knowledge_sources%'";
    let mut killed = false;
    for _ in 0..500 {
        if let Some(pid) = sqlx::query_scalar::<_, i32>(waiting).bind(APPLICATION).fetch_optional(&pool).await.unwrap()
        {
            sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&pool).await.unwrap();
            killed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.rollback().await.unwrap();
    let response = add.await.unwrap();
    assert!(killed, "the add's own statement waited on the lock: {}", response.text());
    assert_ok("knowledge-sources/add", &response);
    let sources: i64 =
        sqlx::query_scalar("SELECT count(*) FROM knowledge_sources WHERE key = 'cut'").fetch_one(&pool).await.unwrap();
    assert_eq!(sources, 1);
    let entitlement = s.ok("workspaces/entitlements/inspect", json!({})).await;
    assert_eq!(entitlement["entitlement"]["usage"]["knowledge_sources"], 2, "counted once");
    assert!(s.app.metric("svc_db_retries_total{path=\"request\"}").await >= 1.0);
}

fn cut_input(agent: &str) -> Value {
    let mut input = add_input(agent, "cut", "Cut off in the middle.");
    input["idempotencyKey"] = json!("cut-off-1");
    input
}

async fn pool_begin(pool: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    pool.begin().await.unwrap()
}

fn processing(max_attempts: i32) -> Processing {
    Processing {
        worker: "faults-worker".to_owned(),
        lease: Duration::from_secs(3),
        max_attempts,
        deadline: Duration::from_secs(900),
        choosing: Default::default(),
        on_settled: Default::default(),
        embeddings: None,
    }
}

fn pending_of(added: &Value) -> RevisionId {
    RevisionId::parse(added["knowledgeSource"]["pendingRevision"]["id"].as_str().unwrap()).unwrap()
}

async fn attempts_of(pool: &PgPool, revision: RevisionId) -> (String, i32) {
    sqlx::query_as("SELECT state::text, attempts FROM knowledge_revisions WHERE id = $1")
        .bind(revision)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Waits until `sql` (a boolean) holds: an event seen in PostgreSQL (a lock
/// waited on in `pg_stat_activity`, a row changed), never a fixed delay.
async fn until(pool: &PgPool, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(pool).await.unwrap() {
        assert!(Instant::now() < deadline, "never saw: {sql}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The worker's pool has a statement waiting on a lock of one of `kinds`
/// (`relation`, `transactionid` for a row, `advisory`).
fn waiting_on(kinds: &str) -> String {
    format!(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'svc-worker-faults'
         AND wait_event_type = 'Lock' AND wait_event IN ({kinds})"
    )
}

/// A Tenant with one source whose revision is pending.
async fn pending_revision(pool: &PgPool) -> (Tenant, RevisionId) {
    let s = tenant(pool, Timeouts::SERVING).await;
    let added = s.ok("knowledge-sources/add", add_input(&s.agent, "faq", "Opening hours: nine to five.")).await;
    let revision = pending_of(&added);
    (s, revision)
}

/// A worker's pool, as `svc-worker` makes it, with `timeouts`.
fn worker_pool(pool: &PgPool, timeouts: Timeouts) -> PgPool {
    connect(&url_of(pool), "svc-worker-faults", 4, timeouts).unwrap()
}

/// Holds the Workspace's usage row and its shards (as a frozen replica's open
/// transaction does) until dropped or rolled back: an add finds no shard to
/// take room on and waits for the row to share room out.
async fn hold_usage(pool: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = pool_begin(pool).await;
    sqlx::query("SELECT 1 FROM workspace_usage FOR UPDATE").execute(&mut *holder).await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage_shards FOR UPDATE").execute(&mut *holder).await.unwrap();
    holder
}

/// Holds a lock a promotion's index write waits on (as a frozen replica's open
/// transaction, or a long one, would) until dropped or rolled back. (Not the
/// usage row: a first revision's promotion leaves usage alone.)
async fn hold_index(pool: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = pool_begin(pool).await;
    sqlx::query("LOCK TABLE knowledge_passages IN SHARE MODE").execute(&mut *holder).await.unwrap();
    holder
}

/// Waiting on another holder's lock is contention, not a failed attempt: the
/// attempt backs off and tries again while it holds its lease, and ends
/// `active` having spent one attempt, however many lock timeouts it met (were
/// each retry a new counted attempt, a limit of 2 would fail it `internal`).
#[sqlx::test(migrations = "../migrations")]
async fn contention_is_retried_within_one_attempt(pool: PgPool) {
    let (_s, revision) = pending_revision(&pool).await;
    let holder = hold_index(&pool).await;
    // The worker's pool gives up on a lock after 100 ms.
    let timeouts = Timeouts { lock: Duration::from_millis(100), ..Timeouts::SERVING };
    let worker = worker_pool(&pool, timeouts);
    let processing = processing(2);
    let running = tokio::spawn(async move { process(&worker, revision, &processing).await });
    // Let it meet several lock timeouts (each retried within the attempt), then let go.
    let before = svc_core::faults::retries(svc_core::faults::Retry::Work);
    let deadline = Instant::now() + Duration::from_secs(30);
    while svc_core::faults::retries(svc_core::faults::Retry::Work) < before + 3 {
        assert!(Instant::now() < deadline, "the attempt never retried");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    holder.rollback().await.unwrap();
    assert_eq!(running.await.unwrap().unwrap(), Outcome::Promoted);
    assert_eq!(attempts_of(&pool, revision).await, ("active".to_owned(), 1));
}

/// An attempt whose lease was taken meanwhile (it ran out while the attempt was
/// stuck, and another attempt started) stops at once and writes nothing.
#[sqlx::test(migrations = "../migrations")]
async fn an_attempt_that_lost_its_lease_midway_writes_nothing(pool: PgPool) {
    let (_s, revision) = pending_revision(&pool).await;
    let holder = hold_index(&pool).await;
    let timeouts = Timeouts { lock: Duration::from_millis(100), ..Timeouts::SERVING };
    let worker = worker_pool(&pool, timeouts);
    let processing = processing(5);
    let running = tokio::spawn(async move { process(&worker, revision, &processing).await });
    until(&pool, &waiting_on("'relation'")).await;
    // Another replica's attempt takes the revision over.
    sqlx::query(
        "UPDATE knowledge_revisions SET lease_owner = 'other/1', lease_until = now() + interval '1 hour' WHERE id = $1",
    )
    .bind(revision)
    .execute(&pool)
    .await
    .unwrap();
    // The renewal (every lease / 3) finds the lease gone: the attempt stops
    // while the lock is still held (it would otherwise retry until the
    // deadline), and skips the revision, now another's.
    let outcome = tokio::time::timeout(Duration::from_secs(10), running).await;
    holder.rollback().await.unwrap();
    let outcome = outcome.expect("the attempt stopped once its lease was taken").unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Skipped);
    let (state, _) = attempts_of(&pool, revision).await;
    assert_eq!(state, "processing", "still the other attempt's");
    let owner: String = sqlx::query_scalar("SELECT lease_owner FROM knowledge_revisions WHERE id = $1")
        .bind(revision)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(owner, "other/1");
    let passages: i64 = sqlx::query_scalar("SELECT count(*) FROM knowledge_passages").fetch_one(&pool).await.unwrap();
    assert_eq!(passages, 0);
}

/// A lost connection in the middle of processing is retried within the
/// attempt too: terminated sessions do not fail the revision.
#[sqlx::test(migrations = "../migrations")]
async fn terminated_worker_sessions_do_not_fail_the_revision(pool: PgPool) {
    let (_s, revision) = pending_revision(&pool).await;
    let holder = hold_index(&pool).await;
    let worker = worker_pool(&pool, Timeouts::SERVING);
    let processing = processing(1);
    let running = tokio::spawn(async move { process(&worker, revision, &processing).await });
    // The promotion waits on the lock; its session is terminated meanwhile.
    let waiting = "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
                   WHERE application_name = 'svc-worker-faults' AND wait_event_type = 'Lock'";
    let mut terminated = 0;
    for _ in 0..500 {
        terminated = sqlx::query_scalar::<_, i64>(waiting).fetch_one(&pool).await.unwrap();
        if terminated > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(terminated > 0, "the promotion waited on the lock");
    holder.rollback().await.unwrap();
    assert_eq!(running.await.unwrap().unwrap(), Outcome::Promoted);
    assert_eq!(attempts_of(&pool, revision).await, ("active".to_owned(), 1), "one attempt, within the limit of 1");
}

/// A `BEGIN` whose connection is lost every time is retried once on a fresh
/// connection, then answered 503: never retried without end.
#[sqlx::test(migrations = "../migrations")]
async fn a_begin_that_keeps_losing_its_connection_is_retried_once(pool: PgPool) {
    let o = pool.connect_options();
    let proxy = svc_tests::proxy::Proxy::start(format!("{}:{}", o.get_host(), o.get_port()).parse().unwrap()).await;
    let url = format!("postgres://{}@127.0.0.1:{}/{}", o.get_username(), proxy.port, o.get_database().unwrap());
    let s = Tenant::with_config(connect(&url, APPLICATION, 5, Timeouts::SERVING).unwrap(), config()).await;
    let before = s.app.metric("svc_db_retries_total{path=\"request\"}").await;
    proxy.drop_on(b"BEGIN");
    let input = add_input(&s.agent, "doomed", "Never stored.");
    let answered = tokio::time::timeout(Duration::from_secs(20), s.call("knowledge-sources/add", input)).await;
    let response = answered.expect("an answer, not a retry loop");
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(response.headers.contains_key("retry-after"));
    let retries = s.app.metric("svc_db_retries_total{path=\"request\"}").await - before;
    assert_eq!(retries, 1.0, "BEGIN retried once");
}

/// A statement that runs past its timeout is the step's own fault, not
/// contention: the attempt ends at once and counts (with a limit of one, the
/// next job fails the revision `internal`) instead of repeating it until the
/// deadline.
#[sqlx::test(migrations = "../migrations")]
async fn a_statement_timeout_ends_the_attempt_and_counts(pool: PgPool) {
    let (_s, revision) = pending_revision(&pool).await;
    for statement in [
        "CREATE FUNCTION slow_passages() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$",
        "CREATE TRIGGER slow_passages BEFORE INSERT ON knowledge_passages FOR EACH STATEMENT EXECUTE FUNCTION slow_passages()",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let timeouts = Timeouts { statement: Duration::from_millis(300), ..Timeouts::SERVING };
    let worker = worker_pool(&pool, timeouts);
    let processing = Processing { deadline: Duration::from_secs(120), ..processing(1) };
    let first = tokio::time::timeout(Duration::from_secs(15), process(&worker, revision, &processing)).await;
    assert!(first.expect("the attempt ended, not retried until the deadline").is_err());
    assert_eq!(attempts_of(&pool, revision).await, ("processing".to_owned(), 1), "the attempt counts");
    assert_eq!(process(&worker, revision, &processing).await.unwrap(), Outcome::Failed("internal"));
}

/// Where an attempt is cut short by its own worker (its job's future dropped:
/// a queue consumer's restart, a shutdown).
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// While its claim waits for the source another transaction holds.
    Claim,
    /// While its index write waits for a lock on the passages.
    IndexWrite,
    /// While its promotion's COMMIT waits (a deferred trigger waits for an
    /// advisory lock the test holds).
    Commit,
}

/// An attempt cut short at each await point of the job runner's
/// `take_next` (the worker's wake-up) ends in exactly one of two states:
/// handed back uncounted (its lease given up at once), or promoted and
/// counted, as its COMMIT really went; and the worker's metrics hook hears
/// that outcome exactly once.
#[sqlx::test(migrations = "../migrations")]
async fn an_attempt_cut_short_at_any_await_point_is_handed_back_or_counted_as_promoted(pool: PgPool) {
    for cut in [Cut::Claim, Cut::IndexWrite, Cut::Commit] {
        let (_s, revision) = pending_revision(&pool).await;
        let (told, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let processing = Processing {
            on_settled: OnSettled::new(move |settled| {
                let _ = told.send(settled);
            }),
            ..processing(1)
        };
        let worker = worker_pool(&pool, Timeouts::SERVING);
        let mut holder = pool_begin(&pool).await;
        let mut advisory = svc_core::runtime::connection(&pool).await.unwrap();
        let wait_for = match cut {
            Cut::Claim => {
                sqlx::query("SELECT 1 FROM knowledge_sources FOR UPDATE").execute(&mut *holder).await.unwrap();
                "'transactionid', 'tuple'"
            }
            Cut::IndexWrite => {
                sqlx::query("LOCK TABLE knowledge_passages IN SHARE MODE").execute(&mut *holder).await.unwrap();
                "'relation'"
            }
            Cut::Commit => {
                for statement in [
                    "CREATE OR REPLACE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$",
                    "CREATE CONSTRAINT TRIGGER wait_at_commit AFTER UPDATE ON knowledge_revisions
                     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.state = 'active')
                     EXECUTE FUNCTION wait_at_commit()",
                ] {
                    sqlx::query(statement).execute(&pool).await.unwrap();
                }
                sqlx::query("SELECT pg_advisory_lock(4242)").execute(&mut *advisory).await.unwrap();
                "'advisory'"
            }
        };
        let (w, p) = (worker.clone(), processing.clone());
        let running = tokio::spawn(async move { take_next(&w, &p).await });
        until(&pool, &waiting_on(wait_for)).await;
        running.abort();
        assert!(running.await.unwrap_err().is_cancelled());
        // What waited goes on once let go; the attempt's settlement waits for it.
        holder.rollback().await.unwrap();
        sqlx::query("SELECT pg_advisory_unlock_all()").execute(&mut *advisory).await.unwrap();
        let settled = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await.expect("settled").unwrap();
        let (state, attempts) = attempts_of(&pool, revision).await;
        let leased: bool =
            sqlx::query_scalar("SELECT coalesce(lease_until > now(), false) FROM knowledge_revisions WHERE id = $1")
                .bind(revision)
                .fetch_one(&pool)
                .await
                .unwrap();
        match cut {
            Cut::Claim | Cut::IndexWrite => {
                assert_eq!(settled, Settled::HandedBack, "{cut:?}");
                assert_eq!(
                    (state.as_str(), attempts, leased),
                    ("processing", 0, false),
                    "{cut:?}: handed back uncounted"
                );
                let passages: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM knowledge_passages WHERE revision_id = $1")
                        .bind(revision)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                assert_eq!(passages, 0, "{cut:?}: nothing of it written");
            }
            Cut::Commit => {
                assert_eq!(settled, Settled::Promoted, "{cut:?}");
                assert_eq!((state.as_str(), attempts), ("active", 1), "{cut:?}: promoted and counted");
            }
        }
        assert!(heard.try_recv().is_err(), "{cut:?}: told once");
        // The next job finishes what is left, within the limit of one attempt.
        sqlx::query("DROP TRIGGER IF EXISTS wait_at_commit ON knowledge_revisions").execute(&pool).await.unwrap();
        let next = process(&worker, revision, &processing).await.unwrap();
        let expected = if matches!(cut, Cut::Commit) { Outcome::Skipped } else { Outcome::Promoted };
        assert_eq!(next, expected, "{cut:?}");
        assert_eq!(attempts_of(&pool, revision).await, ("active".to_owned(), 1), "{cut:?}");
    }
}

/// A statement timeout inside processing costs exactly one attempt, at the
/// level of the job: the job's retry (`svc_core::retry`, as the worker runs a
/// wake-up) does not take the revision again for another counted attempt.
#[sqlx::test(migrations = "../migrations")]
async fn a_statement_timeout_in_a_job_costs_exactly_one_attempt(pool: PgPool) {
    let (_s, revision) = pending_revision(&pool).await;
    let holder = hold_index(&pool).await;
    let timeouts = Timeouts { statement: Duration::from_millis(200), ..Timeouts::SERVING };
    let worker = worker_pool(&pool, timeouts);
    let processing = processing(5);
    let job = svc_core::retry::work("wake-up", || take_next(&worker, &processing)).await;
    holder.rollback().await.unwrap();
    let error = job.expect_err("the job gave the work up");
    assert!(svc_core::error::chain(&error).contains("statement timeout"), "{error}");
    assert_eq!(attempts_of(&pool, revision).await, ("processing".to_owned(), 1), "one attempt, counted once");
}

/// Redis cut off without a word (a black hole): the first push waits out its
/// timeout and opens the queue's breaker; the pushes after it fail at once
/// without trying Redis (the work is in PostgreSQL, and the sweeper sends
/// its jobs); a probe closes the breaker once Redis answers, and pushes go
/// through again. Real Redis behind a proxy, under a namespace of its own.
#[tokio::test]
async fn a_push_that_fails_opens_the_breaker_until_redis_answers_again() {
    use svc_core::ids::RunId;
    use svc_core::jobs::{Job, Queue, QueueError};
    let proxy = svc_tests::proxy::Proxy::start("127.0.0.1:6379".parse().unwrap()).await;
    let ns = svc_tests::stack::namespace();
    let queue = Queue::new(&format!("redis://127.0.0.1:{}", proxy.port), &ns).unwrap();
    let job = || [Job::ApplyReconcile { run: RunId::new() }];
    queue.send(&job()).await.unwrap();
    assert!(!queue.breaker_open());
    let exposition = || svc_core::metrics::Registry::default().render(svc_core::metrics::Scrape::default());
    let open = |text: &str| text.lines().any(|l| l == "svc_queue_breaker_open 1");

    proxy.black_hole();
    assert!(matches!(queue.send(&job()).await, Err(QueueError::Timeout(_))), "the first push waits out its timeout");
    assert!(queue.breaker_open());
    assert!(open(&exposition()), "{}", exposition());
    for _ in 0..3 {
        assert!(matches!(queue.send(&job()).await, Err(QueueError::BreakerOpen)), "later pushes do not try Redis");
    }

    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(30);
    while queue.breaker_open() {
        assert!(Instant::now() < deadline, "the probe never closed the breaker");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!open(&exposition()));
    queue.send(&job()).await.unwrap();
    svc_tests::stack::flush_namespace("redis://127.0.0.1:6379", &ns).await;
}
