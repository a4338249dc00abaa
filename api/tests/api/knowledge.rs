//! Knowledge Sources: the operations, their rules and bounds, and processing
//! (driven here by calling the worker's processing step directly; the real
//! worker process is tested end to end in `tests/`).

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::ids::{AgentId, RevisionId};
use svc_core::knowledge::{Outcome, Processing, process};
use svc_tests::knowledge::assert_sources_show_their_revisions;

use crate::helpers::{Tenant, assert_ok, assert_problem, waits_on_a_lock};

fn digest(content: &str) -> String {
    svc_contract::digest::sha256_prefixed(content.as_bytes())
}

pub fn add_input(agent: &str, key: &str, content: &str) -> Value {
    json!({
        "agentId": agent, "key": key, "title": format!("Title of {key}"),
        "provenance": { "kind": "repository", "uri": format!("https://git.example/{key}.md") },
        "revision": "r1", "digest": digest(content), "content": content,
    })
}

fn replace_input(agent: &str, source: &str, revision: &str, content: &str) -> Value {
    json!({
        "agentId": agent, "sourceId": source, "title": "Replaced title",
        "provenance": { "kind": "manual", "uri": "notes" },
        "revision": revision, "digest": digest(content), "content": content,
    })
}

pub fn processing(worker: &str) -> Processing {
    Processing {
        worker: worker.to_owned(),
        lease: Duration::from_secs(30),
        max_attempts: 3,
        deadline: Duration::from_secs(900),
        choosing: Default::default(),
        on_settled: Default::default(),
        embeddings: None,
    }
}

/// The revision id of a source's pending revision.
pub fn pending_of(source: &Value) -> RevisionId {
    RevisionId::parse(source["pendingRevision"]["id"].as_str().expect("a pending revision")).unwrap()
}

/// Starts an attempt on `revision` as a worker's first step does, with a lease
/// that has already run out (so the next job need not wait for it).
async fn start_attempt(pool: &PgPool, revision: RevisionId) {
    let claim = svc_core::store::knowledge::Claim {
        owner: "gone",
        lease_secs: 0.0,
        deadline_secs: 900.0,
        max_attempts: 3,
        wait: true,
    };
    let mut conn = pool.acquire().await.unwrap();
    let claimed = svc_core::store::knowledge::claim(&mut conn, revision, &claim).await.unwrap();
    assert!(matches!(claimed, Some(svc_core::store::knowledge::Claimed::Started(_))), "{claimed:?}");
}

type Setup = Tenant;

async fn setup(pool: PgPool) -> Setup {
    Tenant::new(pool).await
}

impl Tenant {
    async fn add(&self, key: &str, content: &str) -> Value {
        self.ok("knowledge-sources/add", add_input(&self.agent, key, content)).await["knowledgeSource"].clone()
    }

    async fn inspect(&self, source: &str) -> Value {
        self.ok("knowledge-sources/inspect", json!({ "agentId": self.agent, "sourceId": source })).await["knowledgeSource"]
            .clone()
    }

    async fn process(&self, revision: RevisionId) -> Outcome {
        process(&self.app.pool, revision, &processing("test-worker")).await.unwrap()
    }

    async fn usage(&self) -> Value {
        let data = self.ok("workspaces/entitlements/inspect", json!({})).await;
        data["entitlement"]["usage"].clone()
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn add_answers_what_inspect_shows(pool: PgPool) {
    let s = setup(pool).await;
    let mut input = add_input(&s.agent, "faq-1", "Opening hours are nine to five.");
    input["required"] = json!(true);
    input["provenance"] = json!({ "kind": "url", "uri": "https://help.example/faq-1" });
    let added = s.ok("knowledge-sources/add", input).await["knowledgeSource"].clone();
    let id = added["id"].as_str().unwrap();
    assert_eq!(added, s.inspect(id).await, "the add's answer is built without reading the source back");
    assert_eq!(added["state"], "pending");
}

#[sqlx::test(migrations = "../migrations")]
async fn an_add_racing_its_agents_deletion_writes_nothing(pool: PgPool) {
    let s = setup(pool).await;
    // The Agent's deletion is written but not committed: the add waits for it.
    let mut deletion = s.app.pool.begin().await.unwrap();
    sqlx::query("UPDATE agents SET deleted_at = now() WHERE id = $1")
        .bind(AgentId::parse(&s.agent).unwrap().0)
        .execute(&mut *deletion)
        .await
        .unwrap();
    let add = s.spawn_call("knowledge-sources/add", add_input(&s.agent, "late", "Written after its Agent was gone."));
    let waited = waits_on_a_lock(&s.app.pool, "%FROM agents%FOR SHARE%").await;
    assert!(waited, "the add never waited for the Agent's row");
    deletion.commit().await.unwrap();
    assert_problem(&add.await.unwrap(), 404, "resource_not_found");
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources").await, 0);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn an_added_source_is_pending_then_active(pool: PgPool) {
    let s = setup(pool).await;
    let content = "# FAQ\n\nOur office opens at nine.\n\n## Returns\n\nReturns are free within 30 days.";
    let added = s.add("faq", content).await;
    assert_eq!(added["state"], "pending");
    assert_eq!(added["activeRevision"], Value::Null);
    assert_eq!(added["pendingRevision"]["state"], "pending");
    assert_eq!(added["digest"], digest(content));
    assert_eq!(added["required"], true, "required defaults to true");
    let id = added["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ks_"));
    assert!(added["pendingRevision"]["id"].as_str().unwrap().starts_with("rev_"));
    let waited = s.ok("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    assert_eq!(waited["terminal"], false);
    let retry = waited["retryAfterMs"].as_u64().unwrap();
    assert!((100..=5000).contains(&retry), "{retry}");

    assert_eq!(s.process(pending_of(&added)).await, Outcome::Promoted);
    let active = s.inspect(&id).await;
    assert_eq!(active["state"], "active");
    assert_eq!(active["pendingRevision"], Value::Null);
    assert_eq!(active["activeRevision"]["id"], added["pendingRevision"]["id"]);
    assert_eq!(active["activeRevision"]["state"], "active");
    let waited = s.ok("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    assert_eq!((waited["terminal"].clone(), waited["retryAfterMs"].clone()), (json!(true), Value::Null));
    // Passages are indexed under their headings.
    let headings: Vec<Option<String>> = sqlx::query_scalar("SELECT heading FROM knowledge_passages ORDER BY ordinal")
        .fetch_all(&s.app.pool)
        .await
        .unwrap();
    assert_eq!(headings, [Some("FAQ".to_owned()), Some("FAQ › Returns".to_owned())]);
    // A second run of the same job does nothing.
    assert_eq!(s.process(pending_of(&added)).await, Outcome::Skipped);
    let listed = s.ok("knowledge-sources/list", json!({ "agentId": s.agent })).await;
    assert_eq!(listed["knowledgeSources"].as_array().unwrap().len(), 1);
    assert_eq!(listed["knowledgeSources"][0], active);
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_replacement_is_private_until_it_is_active(pool: PgPool) {
    let s = setup(pool).await;
    let first = s.add("faq", "The office opens at nine.").await;
    let id = first["id"].as_str().unwrap().to_owned();
    s.process(pending_of(&first)).await;
    let replacing = s
        .ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "The office opens at ten."))
        .await["knowledgeSource"]
        .clone();
    assert_eq!(replacing["state"], "replacing");
    assert_eq!(replacing["revision"], "r2", "top-level fields describe the latest submission");
    assert_eq!(replacing["title"], "Replaced title");
    assert_eq!(replacing["activeRevision"]["revision"], "r1", "the last good revision keeps answering");
    assert_eq!(replacing["pendingRevision"]["revision"], "r2");
    let bodies = || async {
        sqlx::query_scalar::<_, String>("SELECT body FROM knowledge_passages").fetch_all(&s.app.pool).await.unwrap()
    };
    assert_eq!(bodies().await, ["The office opens at nine."]);
    assert_eq!(s.process(pending_of(&replacing)).await, Outcome::Promoted);
    let done = s.inspect(&id).await;
    assert_eq!((done["state"].clone(), done["activeRevision"]["revision"].clone()), (json!("active"), json!("r2")));
    assert_eq!(bodies().await, ["The office opens at ten."], "the old passages are gone");
    // A replace identical to the active revision changes nothing.
    let same = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "The office opens at ten.")).await;
    assert_eq!(same["knowledgeSource"], done);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions").await, 2);
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_failing_replacement_keeps_the_last_good_revision(pool: PgPool) {
    let s = setup(pool).await;
    let first = s.add("faq", "The office opens at nine.").await;
    let id = first["id"].as_str().unwrap().to_owned();
    s.process(pending_of(&first)).await;
    let blank = " \n\t \n";
    let replacing = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", blank)).await;
    assert_eq!(s.process(pending_of(&replacing["knowledgeSource"])).await, Outcome::Failed("empty_content"));
    let after = s.inspect(&id).await;
    assert_eq!(after["state"], "active");
    assert_eq!(after["activeRevision"]["revision"], "r1");
    assert_eq!(after["pendingRevision"]["state"], "failed");
    assert_eq!(after["pendingRevision"]["errorCode"], "empty_content");
    let response = s.call("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    let body = assert_problem(&response, 422, "processing_failed");
    assert_eq!(body["error"]["details"]["knowledgeSource"], after);
    let passages: i64 = s.app.count("SELECT count(*) FROM knowledge_passages").await;
    assert_eq!(passages, 1, "still the first revision's");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_newer_replacement_supersedes_an_unfinished_one(pool: PgPool) {
    let s = setup(pool).await;
    let first = s.add("faq", "Version one.").await;
    let id = first["id"].as_str().unwrap().to_owned();
    s.process(pending_of(&first)).await;
    let second = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "Version two.")).await;
    let third = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r3", "Version three.")).await;
    let (second, third) = (pending_of(&second["knowledgeSource"]), pending_of(&third["knowledgeSource"]));
    let state: (String, Option<String>) =
        sqlx::query_as("SELECT state::text, error_code FROM knowledge_revisions WHERE id = $1")
            .bind(second.0)
            .fetch_one(&s.app.pool)
            .await
            .unwrap();
    assert_eq!(state, ("failed".to_owned(), Some("superseded".to_owned())));
    // The superseded job arrives late: nothing happens.
    assert_eq!(s.process(second).await, Outcome::Skipped);
    assert_eq!(s.inspect(&id).await["activeRevision"]["revision"], "r1");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
    assert_eq!(s.process(third).await, Outcome::Promoted);
    assert_eq!(s.inspect(&id).await["activeRevision"]["revision"], "r3");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

/// A source row carries copies of its revisions' fields: at every step of a
/// source's life, what a read shows is what the revisions hold; a candidate a
/// worker holds shows as `processing`.
#[sqlx::test(migrations = "../migrations")]
async fn a_source_shows_its_revisions_at_every_step(pool: PgPool) {
    let s = setup(pool).await;
    let shown = || assert_sources_show_their_revisions(&s.app.pool);
    let state = |source: &Value| (source["state"].clone(), source["pendingRevision"]["state"].clone());
    let added = s.add("faq", "Version one.").await;
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(shown().await, 1);

    start_attempt(&s.app.pool, pending_of(&added)).await;
    assert_eq!(state(&s.inspect(&id).await), (json!("processing"), json!("processing")));
    let waited = s.ok("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    assert_eq!(state(&waited["knowledgeSource"]), (json!("processing"), json!("processing")));
    assert_eq!(waited["terminal"], false);
    assert_eq!(shown().await, 1);
    assert_eq!(s.process(pending_of(&added)).await, Outcome::Promoted);
    assert_eq!(shown().await, 1);

    let second = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "Version two.")).await;
    let second = pending_of(&second["knowledgeSource"]);
    assert_eq!(shown().await, 1);
    start_attempt(&s.app.pool, second).await;
    assert_eq!(state(&s.inspect(&id).await), (json!("replacing"), json!("processing")));
    assert_eq!(shown().await, 1);
    assert_eq!(s.process(second).await, Outcome::Promoted);
    let active = s.inspect(&id).await;
    assert_eq!((active["revision"].clone(), active["activeRevision"]["revision"].clone()), (json!("r2"), json!("r2")));
    assert_eq!(shown().await, 1);

    let blank = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r3", " \n ")).await;
    assert_eq!(s.process(pending_of(&blank["knowledgeSource"])).await, Outcome::Failed("empty_content"));
    assert_eq!(state(&s.inspect(&id).await), (json!("active"), json!("failed")));
    assert_eq!(shown().await, 1);
    s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r4", "Version four.")).await;
    let fifth = s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r5", "Version five.")).await;
    assert_eq!(fifth["knowledgeSource"]["pendingRevision"]["revision"], "r5");
    assert_eq!(shown().await, 1);

    let other = s.add("other", "Another source.").await;
    s.process(pending_of(&other)).await;
    assert_eq!(shown().await, 2);
    let other = other["id"].as_str().unwrap();
    let delete = json!({ "agentId": s.agent, "sourceId": other, "tombstone": true, "prune": true, "confirm": other });
    s.ok("knowledge-sources/delete", delete).await;
    assert_eq!(shown().await, 1);
}

/// Sources stored before migration 0010 are read from the fields it copied
/// onto their rows: in every state a source can be in, they show what their
/// revisions hold.
#[sqlx::test(migrations = false)]
async fn sources_stored_before_0010_show_their_revisions(pool: PgPool) {
    let migrator = sqlx::migrate!("../migrations");
    migrator.run_to(9, &pool).await.unwrap();
    // Sources: active only; pending; an active one with a processing
    // candidate; one with a failed candidate; a failed first revision; deleted.
    sqlx::raw_sql(
        "BEGIN;
         INSERT INTO workspaces (id, name, slug, plan) VALUES ('00000000-0000-0000-0000-00000000000a', 'W', 'w', 'pro');
         INSERT INTO agents (id, workspace_id, name, slug, default_language, temperature)
         VALUES ('00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-00000000000a', 'A', 'a', 'en', 0.2);
         CREATE TEMP TABLE seed (source int, revision int, state revision_state, error_code text, latest bool,
                                 active bool, candidate bool);
         INSERT INTO seed VALUES (1, 1, 'active', NULL, true, true, false),
                                 (2, 1, 'pending', NULL, true, false, true),
                                 (3, 1, 'active', NULL, false, true, false), (3, 2, 'processing', NULL, true, false, true),
                                 (4, 1, 'active', NULL, false, true, false), (4, 2, 'failed', 'empty_content', true, false, true),
                                 (5, 1, 'failed', 'internal', true, false, true),
                                 (6, 1, 'replaced', NULL, true, false, false);
         CREATE TEMP VIEW seeded AS
         SELECT *, ('00000000-0000-0000-0001-' || lpad(source::text, 12, '0'))::uuid AS source_id,
                ('00000000-0000-0000-0002-' || lpad((10 * source + revision)::text, 12, '0'))::uuid AS revision_id
         FROM seed;
         INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id, candidate_revision_id)
         SELECT source_id, '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-00000000000b',
                'key-' || source, revision_id, revision_id
         FROM seeded WHERE latest;
         INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title,
                                          provenance_kind, provenance_uri, required, content_bytes, state, error_code,
                                          imported_at)
         SELECT revision_id, source_id, '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-00000000000b',
                'r' || revision, 'sha256:' || repeat(revision::text, 64), 'Title ' || source || '.' || revision,
                (ARRAY['repository', 'url', 'manual']::provenance_kind[])[1 + revision % 3],
                'https://example.test/' || source, revision = 1, 100 * source + revision, state, error_code,
                now() - make_interval(mins => 10 * source + revision)
         FROM seeded;
         UPDATE knowledge_sources s SET active_revision_id = seeded.revision_id,
                candidate_revision_id = (SELECT revision_id FROM seeded c WHERE c.source = seeded.source AND c.candidate)
         FROM seeded WHERE seeded.source_id = s.id AND seeded.active;
         UPDATE knowledge_sources SET deleted_at = now(), candidate_revision_id = NULL
         WHERE id = '00000000-0000-0000-0001-000000000006';
         COMMIT;",
    )
    .execute(&pool)
    .await
    .unwrap();
    migrator.run(&pool).await.unwrap();
    assert_eq!(assert_sources_show_their_revisions(&pool).await, 5);
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_attempts_promote_once(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("faq", &"A line of text about the office.\n\n".repeat(200)).await;
    let revision = pending_of(&added);
    let mut attempts = tokio::task::JoinSet::new();
    for i in 0..4 {
        let pool = s.app.pool.clone();
        attempts.spawn(async move { process(&pool, revision, &processing(&format!("worker-{i}"))).await.unwrap() });
    }
    let outcomes = attempts.join_all().await;
    assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Promoted).count(), 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| matches!(o, Outcome::Promoted | Outcome::Skipped)));
    let attempts: i32 =
        sqlx::query_scalar("SELECT attempts FROM knowledge_revisions").fetch_one(&s.app.pool).await.unwrap();
    assert_eq!(attempts, 1, "the others found it leased or done");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

/// Two job slots of one worker process (one worker name) given the same
/// revision: one attempt, not two racing on the same passages.
#[sqlx::test(migrations = "../migrations")]
async fn concurrent_jobs_in_one_worker_attempt_once(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("faq", &"A line of text about the office.\n\n".repeat(2000)).await;
    let revision = pending_of(&added);
    let mut jobs = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let pool = s.app.pool.clone();
        jobs.spawn(async move { process(&pool, revision, &processing("one-process")).await });
    }
    let outcomes: Vec<Outcome> = jobs.join_all().await.into_iter().map(|o| o.expect("no job fails")).collect();
    assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Promoted).count(), 1, "{outcomes:?}");
    let attempts: i32 =
        sqlx::query_scalar("SELECT attempts FROM knowledge_revisions").fetch_one(&s.app.pool).await.unwrap();
    assert_eq!(attempts, 1, "the other slots found it leased or done");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_revision_that_keeps_failing_its_worker_ends_failed(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("faq", "Some content.").await;
    let revision = pending_of(&added);
    // Three attempts that each died without a word (their leases ran out).
    sqlx::raw_sql(
        "UPDATE knowledge_revisions SET attempts = 3, state = 'processing', lease_owner = 'gone',
                                        lease_until = now() - interval '1 second';
         UPDATE knowledge_sources SET candidate_state = 'processing'",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(s.process(revision).await, Outcome::Failed("internal"));
    let source = s.inspect(added["id"].as_str().unwrap()).await;
    assert_eq!(source["state"], "failed");
    assert_eq!(source["pendingRevision"]["errorCode"], "internal");
    assert_eq!(s.usage().await["knowledge_bytes"], 0, "its bytes are freed");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn past_the_deadline_a_revision_times_out(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("faq", "Some content.").await;
    let id = added["id"].as_str().unwrap().to_owned();
    // An hour ago (the source shows its revision's import time).
    sqlx::raw_sql(
        "UPDATE knowledge_revisions SET imported_at = imported_at - interval '1 hour';
         UPDATE knowledge_sources SET imported_at = imported_at - interval '1 hour',
                                      candidate_imported_at = candidate_imported_at - interval '1 hour'",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    let sweep = svc_core::knowledge::Sweep {
        holder: "test-sweeper".into(),
        requeue_after: Duration::from_secs(30),
        deadline: Duration::from_secs(900),
        keep_finished: Duration::from_secs(3600),
        embeddings: None,
    };
    let swept = svc_core::knowledge::sweep(&s.app.pool, None, &sweep).await.unwrap();
    assert_eq!((swept.ran, swept.timed_out), (true, 1));
    let response = s.call("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    let body = assert_problem(&response, 504, "processing_timeout");
    assert_eq!(body["error"]["details"]["knowledgeSource"]["pendingRevision"]["errorCode"], "processing_timeout");
    assert_eq!(assert_sources_show_their_revisions(&s.app.pool).await, 1);
}

/// One replica sweeps at a time by a lease in a row, not by a session: a
/// holder that stops renewing (cut off from PostgreSQL, its session still
/// open as far as PostgreSQL knows) is taken over once the lease runs out.
#[sqlx::test(migrations = "../migrations")]
async fn sweeps_take_turns_by_a_lease_that_runs_out(pool: PgPool) {
    let settings = |holder: &str| svc_core::knowledge::Sweep {
        holder: holder.into(),
        requeue_after: Duration::from_secs(30),
        deadline: Duration::from_secs(900),
        keep_finished: Duration::from_secs(3600),
        embeddings: None,
    };
    // Replica A took the lease and went silent, its connection still open.
    let mut silent = svc_core::runtime::connection(&pool).await.unwrap();
    assert!(svc_core::store::leases::take(&mut silent, "sweeper", "replica-a", 60.0).await.unwrap());
    let swept = svc_core::knowledge::sweep(&pool, None, &settings("replica-b")).await.unwrap();
    assert!(!swept.ran, "A holds a live lease");
    // A's lease runs out (no renewal came): B sweeps, A's session open or not.
    sqlx::query("UPDATE singleton_leases SET expires_at = clock_timestamp() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    let swept = svc_core::knowledge::sweep(&pool, None, &settings("replica-b")).await.unwrap();
    assert!(swept.ran, "B takes the lease over");
    // B gave it up when it finished: A (or anyone) sweeps next without waiting.
    let swept = svc_core::knowledge::sweep(&pool, None, &settings("replica-a")).await.unwrap();
    assert!(swept.ran);
    // A renewal finds a taken lease lost.
    assert!(svc_core::store::leases::take(&mut silent, "sweeper", "replica-c", 60.0).await.unwrap());
    assert!(!svc_core::store::leases::renew(&mut silent, "sweeper", "replica-a", 60.0).await.unwrap());
    assert!(svc_core::store::leases::renew(&mut silent, "sweeper", "replica-c", 60.0).await.unwrap());
}

#[sqlx::test(migrations = "../migrations")]
async fn content_digest_and_key_rules(pool: PgPool) {
    let s = setup(pool).await;
    // 750,000 bytes pass; 750,001 do not.
    let exact = "a".repeat(750_000);
    s.add("exact", &exact).await;
    let over = "a".repeat(750_001);
    let body = assert_problem(
        &s.call("knowledge-sources/add", add_input(&s.agent, "over", &over)).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["issues"][0]["path"], "/content");
    // A digest that is not the content's stores nothing.
    let mut wrong = add_input(&s.agent, "wrong", "content");
    wrong["digest"] = json!(digest("other content"));
    let body = assert_problem(&s.call("knowledge-sources/add", wrong).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "digest_mismatch");
    // A live key cannot be added twice.
    let body = assert_problem(
        &s.call("knowledge-sources/add", add_input(&s.agent, "exact", "x")).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "key_exists");
    assert!(body["error"]["details"]["sourceId"].as_str().unwrap().starts_with("ks_"));
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources").await, 1);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions").await, 1);
    // Nor does a replace's.
    let exact_id = body["error"]["details"]["sourceId"].as_str().unwrap();
    let mut wrong = replace_input(&s.agent, exact_id, "r2", "content");
    wrong["digest"] = json!(digest("other content"));
    let body = assert_problem(&s.call("knowledge-sources/replace", wrong.clone()).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "digest_mismatch");
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions").await, 1);
    // The digest is checked before the source is looked up.
    wrong["sourceId"] = json!(svc_core::ids::SourceId::new().to_string());
    let body = assert_problem(&s.call("knowledge-sources/replace", wrong).await, 400, "invalid_request");
    assert_eq!(body["error"]["details"]["reason"], "digest_mismatch");
    // Bounds of the metadata: 160/161 key, 240/241 title.
    for (field, ok, bad) in [("key", 160, 161), ("title", 240, 241), ("revision", 200, 201)] {
        let mut input = add_input(&s.agent, &format!("bounds-{field}"), "x");
        input[field] = json!("k".repeat(ok));
        assert_ok("knowledge-sources/add", &s.call("knowledge-sources/add", input.clone()).await);
        input[field] = json!("k".repeat(bad));
        input["key"] = json!(format!("other-{field}"));
        if field == "key" {
            input["key"] = json!("k".repeat(bad));
        }
        assert_problem(&s.call("knowledge-sources/add", input).await, 400, "invalid_request");
    }
    // An unknown Agent, or another Workspace's, names nothing.
    let (mallory, mallorys) = s.app.owner("mallory").await;
    let theirs = s.app.agent(&mallory, &mallorys, "Theirs").await;
    assert_problem(&s.call("knowledge-sources/add", add_input(&theirs, "x", "x")).await, 404, "resource_not_found");
    assert_problem(
        &s.call("knowledge-sources/list", json!({ "agentId": "agt_nope" })).await,
        404,
        "resource_not_found",
    );
}

/// The bounds of a source's values are counted in characters, by the
/// contract as by the database's CHECKs: a value of multi-byte characters at
/// its bound is stored whole, one more is refused at its path, an empty one
/// too, and a replace is held to the same bounds.
#[sqlx::test(migrations = "../migrations")]
async fn value_bounds_count_characters_and_hold_on_every_write(pool: PgPool) {
    let s = setup(pool).await;
    let fields: [(&[&str], usize); 4] =
        [(&["key"], 160), (&["title"], 240), (&["revision"], 200), (&["provenance", "uri"], 2000)];
    let set = |input: &mut Value, path: &[&str], value: String| {
        let field = path.iter().fold(&mut *input, |v, name| &mut v[*name]);
        *field = json!(value);
    };
    let mut at_bounds = add_input(&s.agent, "at-bounds", "x");
    for (path, bound) in fields {
        set(&mut at_bounds, path, "é".repeat(bound));
    }
    let added = assert_ok("knowledge-sources/add", &s.call("knowledge-sources/add", at_bounds).await);
    let stored: (i32, i32, i32, i32) = sqlx::query_as(
        "SELECT char_length(s.key), char_length(r.title), char_length(r.revision), char_length(r.provenance_uri)
         FROM knowledge_sources s JOIN knowledge_revisions r ON r.source_id = s.id",
    )
    .fetch_one(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(stored, (160, 240, 200, 2000));
    for (path, bound) in fields {
        for value in ["é".repeat(bound + 1), String::new()] {
            let mut input = add_input(&s.agent, "over", "x");
            set(&mut input, path, value);
            let body = assert_problem(&s.call("knowledge-sources/add", input).await, 400, "invalid_request");
            assert_eq!(body["error"]["details"]["issues"][0]["path"], format!("/{}", path.join("/")));
        }
    }
    let source = added["knowledgeSource"]["id"].as_str().unwrap().to_owned();
    let mut replace = replace_input(&s.agent, &source, "r2", "y");
    replace["title"] = json!("é".repeat(241));
    assert_problem(&s.call("knowledge-sources/replace", replace).await, 400, "invalid_request");
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources").await, 1);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions").await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn bodies_over_eight_mib_are_refused_before_they_are_read(pool: PgPool) {
    let s = setup(pool).await;
    let content = "a".repeat(9 * 1024 * 1024);
    let input = add_input(&s.agent, "huge", &content).to_string();
    let auth = format!("Bearer {}", s.owner.token);
    let response =
        s.app.post_raw("knowledge-sources/add", &[("authorization", &auth), ("svc-workspace", &s.ws)], input).await;
    let body = assert_problem(&response, 413, "invalid_request");
    assert_eq!(body["error"]["details"]["limit"], 8 * 1024 * 1024);
    // Over MCP, the same.
    let arguments = add_input(&s.agent, "huge", &content);
    let response = s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_add", arguments).await;
    assert_problem(&response, 413, "invalid_request");
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn limits_are_checked_and_usage_reported(pool: PgPool) {
    let s = setup(pool).await;
    svc_core::admin::plan_set(
        &s.app.pool,
        &s.ws,
        "trial",
        &["knowledge_sources=2".into(), "knowledge_bytes=100".into()],
    )
    .await
    .unwrap();
    let first = s.add("one", &"a".repeat(40)).await;
    s.add("two", &"b".repeat(40)).await;
    let body = assert_problem(
        &s.call("knowledge-sources/add", add_input(&s.agent, "three", "c")).await,
        403,
        "limit_exceeded",
    );
    assert_eq!(
        body["error"]["details"],
        json!({ "limit": "knowledge_sources", "max": 2, "current": 2, "requested": 1 })
    );
    let usage = s.usage().await;
    assert_eq!((usage["knowledge_sources"].clone(), usage["knowledge_bytes"].clone()), (json!(2), json!(80)));
    // Bytes: a replace of 40 more would pass 100 while the first revision counts.
    let id = first["id"].as_str().unwrap();
    s.process(pending_of(&first)).await;
    let body = assert_problem(
        &s.call("knowledge-sources/replace", replace_input(&s.agent, id, "r2", &"d".repeat(21))).await,
        403,
        "limit_exceeded",
    );
    assert_eq!(
        body["error"]["details"],
        json!({ "limit": "knowledge_bytes", "max": 100, "current": 80, "requested": 21 })
    );
    assert_eq!(s.inspect(id).await["revision"], "r1", "nothing was written");
    s.ok("knowledge-sources/replace", replace_input(&s.agent, id, "r2", &"d".repeat(20))).await;
    assert_eq!(s.usage().await["knowledge_bytes"], 100, "both revisions count until the new one is active");
    let candidate = pending_of(&s.inspect(id).await);
    s.process(candidate).await;
    assert_eq!(s.usage().await["knowledge_bytes"], 60, "the replaced revision is freed");
}

#[sqlx::test(migrations = "../migrations")]
async fn deletion_needs_tombstone_prune_and_the_exact_id(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("faq", "Something to forget.").await;
    s.process(pending_of(&added)).await;
    let id = added["id"].as_str().unwrap().to_owned();
    let base = json!({ "agentId": s.agent, "sourceId": id, "tombstone": true, "prune": true, "confirm": id });
    let mut cases = Vec::new();
    for field in ["tombstone", "prune", "confirm"] {
        let mut input = base.clone();
        input.as_object_mut().unwrap().remove(field);
        cases.push(input);
    }
    let mut wrong = base.clone();
    wrong["confirm"] = json!(format!("{id}x"));
    cases.push(wrong);
    let mut not_prune = base.clone();
    not_prune["prune"] = json!(false);
    cases.push(not_prune);
    for input in cases {
        assert_problem(&s.call("knowledge-sources/delete", input).await, 428, "confirmation_required");
    }
    assert_eq!(s.inspect(&id).await["state"], "active");
    let deleted = s.ok("knowledge-sources/delete", base).await;
    assert_eq!(deleted, json!({ "sourceId": id, "deleted": true }));
    assert_problem(
        &s.call("knowledge-sources/inspect", json!({ "agentId": s.agent, "sourceId": id })).await,
        404,
        "resource_not_found",
    );
    let listed = s.ok("knowledge-sources/list", json!({ "agentId": s.agent })).await;
    assert_eq!(listed["knowledgeSources"], json!([]));
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_passages").await, 0, "it stops answering at once");
    let usage = s.usage().await;
    assert_eq!((usage["knowledge_sources"].clone(), usage["knowledge_bytes"].clone()), (json!(0), json!(0)));
    // The key is free again.
    s.add("faq", "New content.").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn deleting_an_agent_deletes_its_sources(pool: PgPool) {
    let s = setup(pool).await;
    let active = s.add("one", "Active content.").await;
    s.process(pending_of(&active)).await;
    let pending = s.add("two", "Pending content.").await;
    s.ok("agents/delete", json!({ "agentId": s.agent, "confirm": true })).await;
    let usage = s.usage().await;
    assert_eq!((usage["knowledge_sources"].clone(), usage["knowledge_bytes"].clone()), (json!(0), json!(0)));
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_passages").await, 0);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_terms").await, 0);
    assert_eq!(s.process(pending_of(&pending)).await, Outcome::Skipped, "its late job finds nothing to do");
}

#[sqlx::test(migrations = "../migrations")]
async fn lists_walk_every_source_once(pool: PgPool) {
    let s = setup(pool).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(s.add(&format!("k{i}"), &format!("content {i}")).await["id"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut input = json!({ "agentId": s.agent, "pageSize": 3 });
        if let Some(c) = &cursor {
            input["cursor"] = json!(c);
        }
        let response = s.call("knowledge-sources/list", input).await;
        let body = response.json();
        assert_ok("knowledge-sources/list", &response);
        seen.extend(
            body["data"]["knowledgeSources"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap().to_owned()),
        );
        match body["meta"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    let body = assert_problem(
        &s.call("knowledge-sources/list", json!({ "agentId": s.agent, "cursor": "bm90LWEtY3Vyc29y" })).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "invalid_cursor");
}

/// The same operations over MCP give the same results as over HTTP.
#[sqlx::test(migrations = "../migrations")]
async fn mcp_gives_the_same_results(pool: PgPool) {
    let s = setup(pool).await;
    let arguments = add_input(&s.agent, "faq", "Over MCP.");
    let response = s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_add", arguments).await;
    let result = &response.json()["result"];
    assert_eq!(result["isError"], false, "{}", response.text());
    let added = result["structuredContent"]["data"]["knowledgeSource"].clone();
    assert_eq!(added["state"], "pending");
    let id = added["id"].as_str().unwrap();
    let over_http = s.inspect(id).await;
    let inspect = json!({ "agentId": s.agent, "sourceId": id });
    let response = s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_inspect", inspect).await;
    assert_eq!(response.json()["result"]["structuredContent"]["data"]["knowledgeSource"], over_http);
    let mut wrong = add_input(&s.agent, "bad", "x");
    wrong["digest"] = json!(digest("y"));
    let response = s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_add", wrong).await;
    let result = &response.json()["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"]["error"]["details"]["reason"], "digest_mismatch");
}

/// The database holds what the source view relies on: a live source's latest
/// revision is its candidate, else its active one (a row with neither is
/// refused: a NULL comparison must not let it through), and it carries the
/// shown fields of exactly the revisions it has, a candidate being unfinished
/// or failed with an error code.
#[sqlx::test(migrations = "../migrations")]
async fn a_live_source_row_holds_what_its_view_relies_on(pool: PgPool) {
    let s = setup(pool).await;
    let agent = AgentId::parse(&s.agent).unwrap().0;
    let digest = "'sha256:' || repeat('0', 64)";
    let candidate = |state: &str, error_code: &str| {
        format!(
            "candidate_revision_id = r, candidate_revision = 'r', candidate_digest = {digest},
             candidate_state = {state}, candidate_imported_at = now(), candidate_bytes = 1,
             candidate_error_code = {error_code}"
        )
    };
    let cases = [
        ("nothing", None, Some("knowledge_sources_latest_check")),
        ("a pending candidate", Some(candidate("'pending'", "NULL")), None),
        ("a failed candidate", Some(candidate("'failed'", "'internal'")), None),
        (
            "a candidate without its state",
            Some(candidate("NULL", "NULL")),
            Some("knowledge_sources_candidate_shown_check"),
        ),
        ("an active candidate", Some(candidate("'active'", "NULL")), Some("knowledge_sources_candidate_shown_check")),
        (
            "a failure without a code",
            Some(candidate("'failed'", "NULL")),
            Some("knowledge_sources_candidate_shown_check"),
        ),
        (
            "a pending candidate with a code",
            Some(candidate("'pending'", "'internal'")),
            Some("knowledge_sources_candidate_shown_check"),
        ),
        (
            "an active revision not shown",
            Some("active_revision_id = r".to_owned()),
            Some("knowledge_sources_active_shown_check"),
        ),
        (
            "an active revision shown",
            Some(format!(
                "active_revision_id = r, active_revision = 'r', active_digest = {digest}, active_imported_at = now(),
                 active_bytes = 1"
            )),
            None,
        ),
    ];
    for (case, set, refused_by) in cases {
        // A deleted row (exempt from the CHECKs) with its latest revision,
        // made live with `set`.
        let mut tx = s.app.pool.begin().await.unwrap();
        let insert = format!(
            "INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id, revision, digest, title,
                                            provenance_kind, provenance_uri, required, imported_at, deleted_at)
             SELECT '00000000-0000-0000-0000-000000000001', workspace_id, id, 'k', '00000000-0000-0000-0000-000000000002',
                    'r', {digest}, 't', 'manual', 'u', true, now(), now()
             FROM agents WHERE id = $1"
        );
        sqlx::query(sqlx::AssertSqlSafe(insert)).bind(agent).execute(&mut *tx).await.unwrap();
        let revision = format!(
            "INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title,
                                              provenance_kind, provenance_uri, required, content_bytes)
             SELECT '00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001', workspace_id, id,
                    'r', {digest}, 't', 'manual', 'u', true, 1
             FROM agents WHERE id = $1"
        );
        sqlx::query(sqlx::AssertSqlSafe(revision)).bind(agent).execute(&mut *tx).await.unwrap();
        let update = format!(
            "UPDATE knowledge_sources SET deleted_at = NULL {}
             FROM (SELECT '00000000-0000-0000-0000-000000000002'::uuid AS r) n",
            set.map(|set| format!(", {set}")).unwrap_or_default()
        );
        let result = sqlx::query(sqlx::AssertSqlSafe(update)).execute(&mut *tx).await;
        match (result, refused_by) {
            (Ok(_), None) => {}
            (Ok(_), Some(check)) => panic!("{case}: stored, though {check} should refuse it"),
            (Err(error), None) => panic!("{case}: refused, though it should be stored: {error}"),
            (Err(error), Some(check)) => {
                let refused = error.as_database_error().and_then(|e| e.constraint().map(str::to_owned));
                assert_eq!(refused.as_deref(), Some(check), "{case}: {error}");
            }
        }
        tx.rollback().await.unwrap();
    }
}

/// PostgreSQL refuses a source's or a revision's value outside the contract's
/// bounds, whoever writes it (a new row or a changed one), and stores one
/// exactly at a bound: the last guard for a writer that skips the contract's
/// input types. The bounds are read from the add's input schema and
/// `MAX_CONTENT_BYTES`, so the database and the contract cannot drift apart;
/// lengths count characters, as JSON Schema does, so a bound made of two-byte
/// characters is stored.
#[sqlx::test(migrations = "../migrations")]
async fn the_database_refuses_values_outside_the_contracts_bounds(pool: PgPool) {
    let s = setup(pool).await;
    let added = s.add("bounded", "Content within its bounds.").await;
    let source = svc_core::ids::SourceId::parse(added["id"].as_str().unwrap()).unwrap().0;
    let revision = pending_of(&added).0;
    let schema = Value::Object(svc_contract::catalog::by_path("knowledge-sources/add").unwrap().input_schema().clone());
    let max_length = |pointer: &str| schema.pointer(pointer).and_then(Value::as_u64).unwrap() as usize;
    // (column, the CHECK that guards it, a value, whether it is refused)
    let mut cases: Vec<(&str, &str, String, bool)> = Vec::new();
    for (column, check, pointer) in [
        ("key", "knowledge_sources_key_check", "/properties/key/maxLength"),
        ("revision", "knowledge_revisions_revision_check", "/properties/revision/maxLength"),
        ("title", "knowledge_revisions_title_check", "/properties/title/maxLength"),
        (
            "provenance_uri",
            "knowledge_revisions_provenance_uri_check",
            "/properties/provenance/properties/uri/maxLength",
        ),
    ] {
        let max = max_length(pointer);
        for (value, refused) in
            [("é".repeat(max), false), ("é".to_owned(), false), ("é".repeat(max + 1), true), (String::new(), true)]
        {
            cases.push((column, check, value, refused));
        }
    }
    let digest_pattern = schema.pointer("/properties/digest/pattern").and_then(Value::as_str).unwrap();
    let hex = "0123456789abcdef".repeat(4);
    for (value, refused) in [
        (format!("sha256:{hex}"), false),
        (format!("sha256:{}", &hex[1..]), true),
        (format!("sha256:{hex}0"), true),
        (format!("sha256:{}", hex.to_uppercase()), true),
        (format!("sha512:{hex}"), true),
    ] {
        cases.push(("digest", "knowledge_revisions_digest_check", value, refused));
    }
    let most = svc_contract::knowledge::MAX_CONTENT_BYTES;
    for (bytes, refused) in [(1, false), (most, false), (0, true), (most + 1, true)] {
        cases.push(("content_bytes", "knowledge_revisions_content_bytes_check", bytes.to_string(), refused));
    }

    for (column, check, value, refused) in &cases {
        let (table, id) =
            if *column == "key" { ("knowledge_sources", source) } else { ("knowledge_revisions", revision) };
        let typed = if *column == "content_bytes" { "$2::integer" } else { "$2::text" };
        // A copy of the row with the value (a deleted source, so its key is
        // free), and the row itself changed to it.
        let deleted = if table == "knowledge_sources" { ", 'deleted_at', now()" } else { "" };
        let insert = format!(
            "INSERT INTO {table}
             SELECT (jsonb_populate_record(NULL::{table}, to_jsonb(t)
                     || jsonb_build_object('id', gen_random_uuid(), '{column}', {typed}{deleted}))).*
             FROM {table} t WHERE id = $1"
        );
        let update = format!("UPDATE {table} SET {column} = {typed} WHERE id = $1");
        for statement in [insert, update] {
            let mut tx = s.app.pool.begin().await.unwrap();
            let result =
                sqlx::query(sqlx::AssertSqlSafe(statement.clone())).bind(id).bind(value).execute(&mut *tx).await;
            tx.rollback().await.unwrap();
            let shown = match *column {
                "content_bytes" => format!("{value} bytes"),
                "digest" => value.clone(),
                _ => format!("{} characters", value.chars().count()),
            };
            match (result, refused) {
                (Ok(done), false) => assert_eq!(done.rows_affected(), 1, "{statement}"),
                (Ok(_), true) => panic!("{column} of {shown} stored, though {check} should refuse it"),
                (Err(error), false) => panic!("{column} of {shown} refused: {error}"),
                (Err(error), true) => {
                    let refused_by = error.as_database_error().and_then(|e| e.constraint().map(str::to_owned));
                    assert_eq!(refused_by.as_deref(), Some(*check), "{column} of {shown}: {error}");
                }
            }
        }
    }
    // The digest's CHECK is the contract's pattern, as written.
    let definition: String = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'knowledge_revisions_digest_check'",
    )
    .fetch_one(&s.app.pool)
    .await
    .unwrap();
    assert!(definition.contains(digest_pattern), "{definition} checks {digest_pattern}");
}

/// Every lookup by id or key hits an index with 10,000 sources in the Workspace.
#[sqlx::test(migrations = "../migrations")]
async fn lookups_use_indexes_at_ten_thousand_sources(pool: PgPool) {
    let s = setup(pool).await;
    let agent = AgentId::parse(&s.agent).unwrap().0;
    sqlx::query(
        "WITH new AS (SELECT gen_random_uuid() AS source, gen_random_uuid() AS revision, n FROM generate_series(1, 10000) n),
              sources AS (INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id, candidate_revision_id,
                                                         revision, digest, title, provenance_kind, provenance_uri, required,
                                                         imported_at, candidate_revision, candidate_digest, candidate_state,
                                                         candidate_imported_at, candidate_bytes)
                          SELECT source, (SELECT workspace_id FROM agents WHERE id = $1), $1, 'key-' || n, revision, revision,
                                 'r', 'sha256:' || repeat('0', 64), 't', 'manual', 'u', true, now(), 'r',
                                 'sha256:' || repeat('0', 64), 'pending', now(), 1
                          FROM new)
         INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title, provenance_kind,
                                          provenance_uri, required, content_bytes, state)
         SELECT revision, source, (SELECT workspace_id FROM agents WHERE id = $1), $1, 'r', 'sha256:' || repeat('0', 64),
                't', 'manual', 'u', true, 1, 'pending' FROM new",
    )
    .bind(agent)
    .execute(&s.app.pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(&s.app.pool).await.unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *conn).await.unwrap();
    let statements = [
        "PREPARE by_id(uuid, uuid, uuid) AS SELECT * FROM knowledge_source_view WHERE id = $1 AND workspace_id = $2 AND agent_id = $3",
        "PREPARE by_key(uuid, text) AS SELECT id FROM knowledge_sources WHERE agent_id = $1 AND key = $2 AND deleted_at IS NULL",
        "PREPARE page(uuid, uuid) AS SELECT * FROM knowledge_source_view WHERE agent_id = $1 AND id > $2 ORDER BY id LIMIT 51",
    ];
    for statement in statements {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    let some = "00000000-0000-0000-0000-000000000000";
    for explain in [
        format!("EXPLAIN EXECUTE by_id('{some}', '{some}', '{agent}')"),
        format!("EXPLAIN EXECUTE by_key('{agent}', 'key-77')"),
        format!("EXPLAIN EXECUTE page('{agent}', '{some}')"),
    ] {
        let plan: Vec<String> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain.clone())).fetch_all(&mut *conn).await.unwrap();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{explain}:\n{plan}");
    }
}

/// A Tenant whose API keeps wait's answers for an hour unless PostgreSQL says
/// their source changed, so only a notification makes a change show; it
/// returns once the API hears those notifications.
async fn caching(pool: PgPool) -> Tenant {
    let mut config = crate::helpers::config();
    config.wait_cache_entries = 100;
    config.wait_cache_max_age_ms = 3_600_000;
    let s = Tenant::with_config(pool, config).await;
    s.until("the API listens for source changes", || async { s.app.metric("svc_wait_cache_listening").await == 1.0 })
        .await;
    s
}

impl Tenant {
    async fn wait(&self, source: &str) -> Value {
        self.ok("knowledge-sources/wait", json!({ "agentId": self.agent, "sourceId": source })).await
    }

    async fn hits(&self) -> f64 {
        self.app.metric(r#"svc_wait_cache_lookups_total{result="hit"}"#).await
    }

    /// Polls `done` until it holds (a change reaches the API asynchronously).
    async fn until<F: Future<Output = bool>>(&self, what: &str, done: impl Fn() -> F) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !done().await {
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits on `source` twice: the second answer is the kept first one.
    async fn assert_kept(&self, source: &str) {
        let waited = self.wait(source).await;
        let hits = self.hits().await;
        assert_eq!(self.wait(source).await, waited);
        assert_eq!(self.hits().await, hits + 1.0, "kept");
    }

    /// The backend the API listens for source changes on.
    async fn listener_pid(&self) -> Option<i32> {
        sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'",
        )
        .fetch_optional(&self.app.pool)
        .await
        .unwrap()
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn wait_answers_from_its_cache_until_the_source_changes(pool: PgPool) {
    let s = caching(pool).await;
    let added = s.add("faq", "The office opens at nine.").await;
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait(&id).await["terminal"], false);
    // The kept answer is the one PostgreSQL gave, given without reading it.
    s.assert_kept(&id).await;

    // The worker's commit is heard: the next answers are read again.
    assert_eq!(s.process(pending_of(&added)).await, Outcome::Promoted);
    s.until("wait shows the promotion", || async { s.wait(&id).await["terminal"] == true }).await;
    let done = s.wait(&id).await;
    assert_eq!(done["knowledgeSource"], s.inspect(&id).await);
    assert_eq!(done["retryAfterMs"], Value::Null);

    // A terminal answer is never kept: a replace shows on the very next call.
    let hits = s.hits().await;
    s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "The office opens at ten.")).await;
    let replacing = s.wait(&id).await;
    assert_eq!(
        (replacing["terminal"].clone(), replacing["knowledgeSource"]["state"].clone()),
        (json!(false), json!("replacing"))
    );
    assert_eq!(replacing["knowledgeSource"]["pendingRevision"]["revision"], "r2");
    assert_eq!(s.hits().await, hits);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_kept_answer_is_never_another_tenants(pool: PgPool) {
    let s = caching(pool).await;
    let added = s.add("faq", "The office opens at nine.").await;
    let id = added["id"].as_str().unwrap().to_owned();
    s.assert_kept(&id).await;

    let (bob, bob_ws) = s.app.owner("bob").await;
    let bob_agent = s.app.agent(&bob, &bob_ws, "Bob's").await;
    for agent in [&s.agent, &bob_agent] {
        let input = json!({ "agentId": agent, "sourceId": id });
        let response = s.app.op("knowledge-sources/wait", &bob.token, Some(&bob_ws), input).await;
        assert_problem(&response, 404, "resource_not_found");
    }
    // Nor another Agent's of the same Workspace.
    let other = s.app.agent(&s.owner, &s.ws, "Other").await;
    let response = s.call("knowledge-sources/wait", json!({ "agentId": other, "sourceId": id })).await;
    assert_problem(&response, 404, "resource_not_found");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_lost_listener_forgets_what_it_kept(pool: PgPool) {
    let s = caching(pool).await;
    let added = s.add("faq", "The office opens at nine.").await;
    let id = added["id"].as_str().unwrap().to_owned();
    s.wait(&id).await;
    // A change nobody is told of (as if its notification were lost).
    sqlx::raw_sql(
        "ALTER TABLE knowledge_sources DISABLE TRIGGER knowledge_source_changed;
         UPDATE knowledge_sources SET title = 'Renamed';
         ALTER TABLE knowledge_sources ENABLE TRIGGER knowledge_source_changed;",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(s.wait(&id).await["knowledgeSource"]["title"], "Title of faq", "still the kept answer");

    let old = s.listener_pid().await.expect("a listener");
    sqlx::query("SELECT pg_terminate_backend($1)").bind(old).execute(&s.app.pool).await.unwrap();
    s.until("the API listens again", || async {
        s.listener_pid().await.is_some_and(|pid| pid != old) && s.app.metric("svc_wait_cache_listening").await == 1.0
    })
    .await;
    assert_eq!(s.wait(&id).await["knowledgeSource"]["title"], "Renamed", "read again after the loss");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_write_through_the_same_process_shows_on_the_next_wait(pool: PgPool) {
    let s = caching(pool).await;
    // No notifications at all: what this process wrote, it forgets itself.
    sqlx::query("ALTER TABLE knowledge_sources DISABLE TRIGGER knowledge_source_changed")
        .execute(&s.app.pool)
        .await
        .unwrap();
    let id = s.add("faq", "Version one.").await["id"].as_str().unwrap().to_owned();
    s.assert_kept(&id).await;
    s.ok("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "Version two.")).await;
    assert_eq!(s.wait(&id).await["knowledgeSource"]["pendingRevision"]["revision"], "r2");

    s.assert_kept(&id).await;
    let input = json!({ "agentId": s.agent, "sourceId": id, "tombstone": true, "prune": true, "confirm": id });
    s.ok("knowledge-sources/delete", input).await;
    let response = s.call("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    assert_problem(&response, 404, "resource_not_found");

    let id = s.add("other", "Other content.").await["id"].as_str().unwrap().to_owned();
    s.assert_kept(&id).await;
    s.ok("agents/delete", json!({ "agentId": s.agent, "confirm": true })).await;
    let response = s.call("knowledge-sources/wait", json!({ "agentId": s.agent, "sourceId": id })).await;
    assert_problem(&response, 404, "resource_not_found");
}
