//! Whose turn it is: a worker's job takes the revision next in turn across
//! Workspaces (`knowledge::process_next`), and the sweeper sends only the
//! wake-ups the queue lacks. Driven here by calling those steps directly; the
//! real worker is tested end to end in `tests/`.

use serde_json::Value;
use sqlx::PgPool;
use svc_core::ids::{RevisionId, RunId};
use svc_core::jobs::{Job, Queue};
use svc_core::knowledge::{Outcome, process_next};
use svc_core::store;
use svc_core::store::knowledge::{Claim, Claimed};

use crate::helpers::{Tenant, TestUser, assert_ok};
use crate::knowledge::{add_input, pending_of, processing};

/// A second Workspace ("bob"'s) beside the Tenant's.
struct Other {
    user: TestUser,
    ws: String,
    agent: String,
}

async fn other(s: &Tenant) -> Other {
    let (user, ws) = s.app.owner("bob").await;
    let agent = s.app.agent(&user, &ws, "Bob's").await;
    Other { user, ws, agent }
}

async fn add(s: &Tenant, token: &str, ws: &str, agent: &str, key: &str) -> Value {
    let response =
        s.app.op("knowledge-sources/add", token, Some(ws), add_input(agent, key, &format!("About {key}."))).await;
    assert_ok("knowledge-sources/add", &response)["knowledgeSource"].clone()
}

/// The keys of the active sources, in key order.
async fn active_keys(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT key FROM knowledge_sources WHERE active_revision_id IS NOT NULL ORDER BY key")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The keys of active sources, in the order they became active, as one job
/// after another is run.
async fn run_jobs(pool: &PgPool, jobs: usize) -> Vec<String> {
    let mut seen = active_keys(pool).await;
    let mut order = Vec::new();
    for _ in 0..jobs {
        assert_eq!(process_next(pool, &processing("turns")).await.unwrap(), Outcome::Promoted);
        let new: Vec<String> = active_keys(pool).await.into_iter().filter(|key| !seen.contains(key)).collect();
        assert_eq!(new.len(), 1, "one source per job: {new:?}");
        seen.extend(new.clone());
        order.extend(new);
    }
    order
}

/// Alice (a0's Workspace) was served an hour ago and bob (b0's) just now; the
/// sources `held` have an attempt running, leased to a live worker elsewhere.
async fn turns_and_leases(pool: &PgPool, held: &[&str]) {
    sqlx::query(
        "INSERT INTO workspace_turns (workspace_id, served_at)
         SELECT DISTINCT r.workspace_id, CASE WHEN k.key = 'b0' THEN now() ELSE now() - interval '1 hour' END
         FROM knowledge_revisions r JOIN knowledge_sources k ON k.id = r.source_id WHERE k.key IN ('a0', 'b0')",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE knowledge_revisions SET state = 'processing', attempts = 1, lease_owner = 'elsewhere',
                lease_until = now() + interval '1 hour'
         WHERE source_id IN (SELECT id FROM knowledge_sources WHERE key = ANY($1))",
    )
    .bind(held)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE knowledge_sources SET candidate_state = 'processing' WHERE key = ANY($1)")
        .bind(held)
        .execute(pool)
        .await
        .unwrap();
}

#[sqlx::test(migrations = "../migrations")]
async fn a_small_workspace_is_served_between_anothers_backlog(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let bob = other(&s).await;
    for i in 0..4 {
        add(&s, &s.owner.token, &s.ws, &s.agent, &format!("a{i}")).await;
    }
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b0").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b1").await;
    // Oldest work first; then whoever was served longest ago (bob never).
    assert_eq!(run_jobs(&s.app.pool, 6).await, ["a0", "b0", "a1", "b1", "a2", "a3"]);
    // Nothing is left: a further job finds nothing to do.
    assert_eq!(process_next(&s.app.pool, &processing("turns")).await.unwrap(), Outcome::Skipped);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_workspace_with_fewer_attempts_running_goes_first(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let bob = other(&s).await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a0").await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a1").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b0").await;
    // Alice was served an hour ago, bob just now: alice's turn, unless she
    // already has an attempt running (a0's, leased to a live worker).
    turns_and_leases(&s.app.pool, &["a0"]).await;
    assert_eq!(run_jobs(&s.app.pool, 1).await, ["b0"], "bob has none running");
    // With a0's attempt gone (its lease run out), alice's oldest is next again.
    sqlx::raw_sql(
        "UPDATE knowledge_revisions SET lease_until = now() - interval '1 second' WHERE lease_owner = 'elsewhere'",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(run_jobs(&s.app.pool, 2).await, ["a0", "a1"]);
}

/// Wake-ups: the sweeper sends only what the queue lacks, for revisions nobody
/// holds whose last job is old, and marks them sent.
#[sqlx::test(migrations = "../migrations")]
async fn the_sweeper_sends_only_the_missing_wake_ups(pool: PgPool) {
    let s = Tenant::new(pool).await;
    for i in 0..5 {
        add(&s, &s.owner.token, &s.ws, &s.agent, &format!("a{i}")).await;
    }
    let take = |queued: i64| {
        let pool = s.app.pool.clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            store::knowledge::take_unawakened(&mut conn, 60.0, queued, 64, 500).await.unwrap().len()
        }
    };
    assert_eq!(take(0).await, 0, "jobs sent a moment ago may still be on their way");
    sqlx::raw_sql("UPDATE knowledge_revisions SET enqueued_at = now() - interval '1 hour'")
        .execute(&s.app.pool)
        .await
        .unwrap();
    assert_eq!(take(5).await, 0, "one job waits for each");
    assert_eq!(take(3).await, 2, "two are missing");
    assert_eq!(take(0).await, 3, "those two were just sent: the other three");
    assert_eq!(take(0).await, 0);
    // A revision a live attempt holds needs no wake-up.
    sqlx::raw_sql(
        "UPDATE knowledge_revisions SET enqueued_at = now() - interval '1 hour';
         UPDATE knowledge_revisions SET state = 'processing', attempts = 1, lease_owner = 'w',
                lease_until = now() + interval '1 hour'
         WHERE id = (SELECT min(id::text)::uuid FROM knowledge_revisions)",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(take(0).await, 4);
    // A wake-up processes revisions until none is left: no more than
    // producers keep waiting are needed, however long the backlog.
    sqlx::raw_sql("UPDATE knowledge_revisions SET enqueued_at = now() - interval '1 hour'")
        .execute(&s.app.pool)
        .await
        .unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    assert_eq!(store::knowledge::take_unawakened(&mut conn, 60.0, 1, 3, 500).await.unwrap().len(), 2);
    assert_eq!(store::knowledge::take_unawakened(&mut conn, 60.0, 3, 3, 500).await.unwrap().len(), 0);
}

/// The metric of Workspaces with work counts each once.
#[sqlx::test(migrations = "../migrations")]
async fn metrics_count_the_workspaces_with_work(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let bob = other(&s).await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a0").await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a1").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b0").await;
    assert_eq!(s.app.metric("svc_knowledge_pending_workspaces").await, 2.0);
    assert_eq!(s.app.metric("svc_knowledge_backlog").await, 3.0);
    run_jobs(&s.app.pool, 3).await;
    assert_eq!(s.app.metric("svc_knowledge_pending_workspaces").await, 0.0);
}

/// A Workspace whose revisions are all held has nothing to offer, whatever
/// its turn: the next Workspace in turn is served.
#[sqlx::test(migrations = "../migrations")]
async fn a_workspace_with_everything_held_passes_its_turn(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let bob = other(&s).await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a0").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b0").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b1").await;
    // One attempt running in each; alice's turn (served an hour ago), but her
    // only revision is held.
    turns_and_leases(&s.app.pool, &["a0", "b0"]).await;
    assert_eq!(run_jobs(&s.app.pool, 1).await, ["b1"]);
    assert_eq!(process_next(&s.app.pool, &processing("turns")).await.unwrap(), Outcome::Skipped, "all held");
}

/// The keys of the revisions offered by the turn order, in order.
async fn offered(pool: &PgPool, limit: i64) -> Vec<String> {
    let mut conn = pool.acquire().await.unwrap();
    let ids = store::knowledge::next_in_turn(&mut conn, limit).await.unwrap();
    let mut keys = Vec::new();
    for id in ids {
        let key: String = sqlx::query_scalar(
            "SELECT k.key FROM knowledge_sources k JOIN knowledge_revisions r ON r.source_id = k.id WHERE r.id = $1",
        )
        .bind(id.0)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        keys.push(key);
    }
    keys
}

/// With fewer Workspaces waiting than candidates, the first in turn offers its
/// next revisions after every Workspace's oldest, so jobs claiming at once
/// need not all queue for one revision.
#[sqlx::test(migrations = "../migrations")]
async fn fewer_workspaces_than_candidates_offer_their_next_revisions_too(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let bob = other(&s).await;
    for i in 0..5 {
        add(&s, &s.owner.token, &s.ws, &s.agent, &format!("a{i}")).await;
    }
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b0").await;
    add(&s, &bob.user.token, &bob.ws, &bob.agent, "b1").await;
    // Alice's turn (served an hour ago, bob just now).
    turns_and_leases(&s.app.pool, &[]).await;
    assert_eq!(offered(&s.app.pool, 1).await, ["a0"]);
    assert_eq!(offered(&s.app.pool, 2).await, ["a0", "b0"], "as many Workspaces as candidates: their oldest");
    assert_eq!(offered(&s.app.pool, 4).await, ["a0", "b0", "a1", "a2"]);
    // A revision held by a live attempt is never offered; and alice, with an
    // attempt running, now comes after bob, who offers his next one.
    sqlx::query(
        "UPDATE knowledge_revisions SET state = 'processing', attempts = 1, lease_owner = 'elsewhere',
                lease_until = now() + interval '1 hour'
         WHERE source_id = (SELECT id FROM knowledge_sources WHERE key = 'a1')",
    )
    .execute(&s.app.pool)
    .await
    .unwrap();
    assert_eq!(offered(&s.app.pool, 4).await, ["b0", "a0", "b1"]);
}

/// A job does not wait for a revision another job is starting an attempt on
/// (holding its source): it takes the next one offered.
#[sqlx::test(migrations = "../migrations")]
async fn a_job_takes_the_next_revision_while_another_claims_the_oldest(pool: PgPool) {
    let s = Tenant::new(pool).await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a0").await;
    add(&s, &s.owner.token, &s.ws, &s.agent, "a1").await;
    let mut claiming = s.app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM knowledge_sources WHERE key = 'a0' FOR NO KEY UPDATE")
        .execute(&mut *claiming)
        .await
        .unwrap();
    let processing = processing("turns");
    let job = process_next(&s.app.pool, &processing);
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), job)
        .await
        .expect("the job waited for the source another job holds")
        .unwrap();
    assert_eq!(outcome, Outcome::Promoted);
    assert_eq!(active_keys(&s.app.pool).await, ["a1"]);
    claiming.rollback().await.unwrap();
    // The oldest is still there for the next job.
    assert_eq!(run_jobs(&s.app.pool, 1).await, ["a0"]);
}

/// Jobs of one process choosing at the same moment try different revisions
/// first: a job that joins another one choosing starts at the second
/// revision offered, not at the first, which the other is about to claim.
#[sqlx::test(migrations = "../migrations")]
async fn jobs_choosing_together_start_at_different_revisions(pool: PgPool) {
    let s = Tenant::new(pool).await;
    for key in ["a0", "a1", "a2"] {
        add(&s, &s.owner.token, &s.ws, &s.agent, key).await;
    }
    let processing = processing("turns");
    let other = processing.choosing.join();
    assert_eq!(process_next(&s.app.pool, &processing).await.unwrap(), Outcome::Promoted);
    assert_eq!(active_keys(&s.app.pool).await, ["a1"]);
    drop(other);
    // The same process's next job, choosing alone, starts at the first in turn.
    assert_eq!(process_next(&s.app.pool, &processing).await.unwrap(), Outcome::Promoted);
    assert_eq!(active_keys(&s.app.pool).await, ["a0", "a1"]);
}

/// An attempt starting while another attempt of the same Workspace is
/// starting (holding its turn's row) does not wait for it to commit: both
/// move the Workspace to the back of the turn.
#[sqlx::test(migrations = "../migrations")]
async fn attempts_of_one_workspace_start_without_waiting_for_each_other(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let mut revisions = Vec::new();
    for key in ["a0", "a1", "a2", "a3"] {
        revisions.push(pending_of(&add(&s, &s.owner.token, &s.ws, &s.agent, key).await));
    }
    let served_at = || async {
        sqlx::query_scalar::<_, f64>("SELECT extract(epoch FROM served_at)::float8 FROM workspace_turns")
            .fetch_one(&s.app.pool)
            .await
            .unwrap()
    };
    let claim = Claim { owner: "turns", lease_secs: 30.0, deadline_secs: 900.0, max_attempts: 3, wait: true };
    let started = |claimed: Option<Claimed>| assert!(matches!(claimed, Some(Claimed::Started(_))), "{claimed:?}");
    // The first attempt ever: the row is made.
    let mut conn = s.app.pool.acquire().await.unwrap();
    started(store::knowledge::claim(&mut conn, revisions[0], &claim).await.unwrap());
    let first = served_at().await;

    let mut starting = s.app.pool.begin().await.unwrap();
    started(store::knowledge::claim(&mut starting, revisions[1], &claim).await.unwrap());
    let other = store::knowledge::claim(&mut conn, revisions[2], &claim);
    let other = tokio::time::timeout(std::time::Duration::from_secs(30), other)
        .await
        .expect("an attempt waited for another one of its Workspace to start");
    started(other.unwrap());
    starting.commit().await.unwrap();
    assert!(served_at().await > first, "the Workspace went to the back of the turn");
    // Alone, an attempt moves it back itself.
    let second = served_at().await;
    started(store::knowledge::claim(&mut conn, revisions[3], &claim).await.unwrap());
    assert!(served_at().await > second);
}

/// A producer sends wake-ups while fewer than 64 wait, counting wake-ups
/// only: 64 reconcile applies waiting stand for none. Real Redis, under a
/// namespace of its own.
#[tokio::test]
async fn wake_ups_are_sent_while_fewer_than_64_wait() {
    let ns = format!("svctest_{}", uuid::Uuid::now_v7().simple());
    let queue = Queue::new("redis://127.0.0.1:6379", &ns).unwrap();
    let wake_up = || Job::ProcessRevision { revision: RevisionId::new() };
    let apply = || Job::ApplyReconcile { run: RunId::new() };
    queue.push_all(&(0..64).map(|_| apply()).collect::<Vec<_>>()).await.unwrap();
    queue.send(&[wake_up()]).await.unwrap();
    assert_eq!(queue.wake_ups_waiting().await.unwrap(), 1, "reconcile applies are no wake-ups");
    queue.send(&(0..70).map(|_| wake_up()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(queue.wake_ups_waiting().await.unwrap(), 64);
    // With enough waiting, the wake-ups stay out and the rest goes.
    queue.send(&[wake_up(), apply(), wake_up()]).await.unwrap();
    assert_eq!(queue.depth().await.unwrap().waiting, 64 + 64 + 1);
    let mut conn =
        redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{ns}*")).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
}
