//! Usage under concurrent writes: the Entitlement stays exact
//! while a Workspace's writes run side by side, no write holds the
//! Workspace's usage row while it waits for anything else, and adds take room
//! on shards of their own instead of queueing on that row.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{Connection as _, PgConnection, PgPool};
use svc_contract::ProblemCode;
use svc_contract::knowledge::{Provenance, ProvenanceKind};
use svc_contract::operations::knowledge_source::Submission;
use svc_core::entitlements::{Entitlement, LimitKey};
use svc_core::ids::{AgentId, RevisionId, SourceId, WorkspaceId};
use svc_core::jobs::Job;
use svc_core::knowledge::{self, NewIds, Outcome, Processing, Scope, process};
use svc_core::store;
use svc_core::store::knowledge::{Added, NewRevision, Room, SourceRow, Standing};
use svc_core::store::types::{StoredProvenanceKind, StoredWorkspaceStatus};
use svc_core::store::usage::Delta;

use crate::helpers::{Tenant, assert_ok, assert_problem, lock_waiters_reach, waits_on_a_lock};
use crate::knowledge::{add_input, processing};

fn digest(content: &str) -> String {
    svc_contract::digest::sha256_prefixed(content.as_bytes())
}

fn replace_input(agent: &str, source: &str, revision: &str, content: &str) -> Value {
    json!({
        "agentId": agent, "sourceId": source, "title": "Replaced", "provenance": { "kind": "manual", "uri": "n" },
        "revision": revision, "digest": digest(content), "content": content,
    })
}

fn pending_of(source: &Value) -> RevisionId {
    RevisionId::parse(source["pendingRevision"]["id"].as_str().expect("a pending revision")).unwrap()
}

/// The usage the Entitlement reports, beside the usage counted from the rows.
async fn usage_and_recount(s: &Tenant) -> ((i64, i64), (i64, i64)) {
    let data = s.ok("workspaces/entitlements/inspect", json!({})).await;
    let usage = &data["entitlement"]["usage"];
    let reported = (usage["knowledge_sources"].as_i64().unwrap(), usage["knowledge_bytes"].as_i64().unwrap());
    let sources = s.app.count("SELECT count(*) FROM knowledge_sources WHERE deleted_at IS NULL").await;
    let bytes = s
        .app
        .count(
            "SELECT coalesce(sum(content_bytes), 0)::bigint FROM knowledge_revisions
             WHERE state IN ('pending', 'processing', 'active')",
        )
        .await;
    (reported, (sources, bytes))
}

/// 16 adds at once where exactly `fit` fit: exactly `fit` succeed, the others
/// are refused for the limit, and usage is the sum of what was added.
async fn racing_adds(s: &Tenant, limits: &[&str], fit: usize, refused_for: &str) {
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &limits.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut adds = tokio::task::JoinSet::new();
    for i in 0..16 {
        let (app, token, ws, agent) = (s.app.clone(), s.owner.token.clone(), s.ws.clone(), s.agent.clone());
        adds.spawn(async move {
            let content = format!("{:0>100}", i);
            app.op("knowledge-sources/add", &token, Some(&ws), add_input(&agent, &format!("k{i}"), &content)).await
        });
    }
    let responses = adds.join_all().await;
    let added = responses.iter().filter(|r| r.status == 200).count();
    assert_eq!(added, fit, "exactly the adds that fit succeed");
    for response in responses.iter().filter(|r| r.status != 200) {
        let body = assert_problem(response, 403, "limit_exceeded");
        assert_eq!(body["error"]["details"]["limit"], refused_for);
    }
    let (reported, counted) = usage_and_recount(s).await;
    assert_eq!(reported, (fit as i64, 100 * fit as i64));
    assert_eq!(reported, counted);
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_adds_at_the_sources_limit_never_pass_it(pool: PgPool) {
    let s = Tenant::new(pool).await;
    racing_adds(&s, &["knowledge_sources=7"], 7, "knowledge_sources").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_adds_at_the_bytes_limit_never_pass_it(pool: PgPool) {
    let s = Tenant::new(pool).await;
    racing_adds(&s, &["knowledge_bytes=550"], 5, "knowledge_bytes").await;
}

/// A write that waits for a source (here behind a transaction holding it, as
/// a long promotion or replace would) holds up no other write of the
/// Workspace: it has not taken the usage row yet.
#[sqlx::test(migrations = "../migrations")]
async fn writes_waiting_for_a_source_hold_up_no_add(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let busy =
        s.ok("knowledge-sources/add", add_input(&s.agent, "busy", "Some busy content.")).await["knowledgeSource"]
            .clone();
    let id = busy["id"].as_str().unwrap().to_owned();
    // The delete waits on a source of its own: on one source, whichever of the
    // two went first would leave the other a `resource_not_found`.
    let doomed =
        s.ok("knowledge-sources/add", add_input(&s.agent, "doomed", "Some doomed content.")).await["knowledgeSource"]
            .clone();
    let doomed = doomed["id"].as_str().unwrap().to_owned();
    let mut holder = s.app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM knowledge_sources WHERE key IN ('busy', 'doomed') FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let delete = json!({ "agentId": s.agent, "sourceId": doomed, "tombstone": true, "prune": true, "confirm": doomed });
    let waiting = [
        s.spawn_call("knowledge-sources/replace", replace_input(&s.agent, &id, "r2", "Newer busy content.")),
        s.spawn_call("knowledge-sources/delete", delete),
    ];
    assert!(lock_waiters_reach(&s.app.pool, "%", 2).await, "the replace and the delete never both waited");
    // Both writes wait on their sources; an add of another source goes through.
    let add = tokio::time::timeout(
        Duration::from_secs(30),
        s.call("knowledge-sources/add", add_input(&s.agent, "free", "Unrelated content.")),
    )
    .await
    .expect("the add waited for writes of another source");
    assert_ok("knowledge-sources/add", &add);
    holder.rollback().await.unwrap();
    for call in waiting {
        let response = call.await.unwrap();
        assert_eq!(response.status, 200, "{}", response.text());
    }
    let (reported, counted) = usage_and_recount(&s).await;
    assert_eq!(reported, counted);
}

/// Adds, promotions, replacements (superseding and superseded), failures and
/// deletions of many sources at once leave usage equal to what the rows hold.
#[sqlx::test(migrations = "../migrations")]
async fn usage_is_exact_after_concurrent_adds_promotions_failures_and_deletes(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let mut work = tokio::task::JoinSet::new();
    for i in 0..18 {
        let (app, token, ws, agent) = (s.app.clone(), s.owner.token.clone(), s.ws.clone(), s.agent.clone());
        work.spawn(async move {
            let call = |path: &'static str, input: Value| {
                let (app, token, ws) = (app.clone(), token.clone(), ws.clone());
                async move { assert_ok(path, &app.op(path, &token, Some(&ws), input).await) }
            };
            let promote = |revision: RevisionId| {
                let pool = app.pool.clone();
                async move { process(&pool, revision, &processing("w")).await.unwrap() }
            };
            let content = format!("Source {i} says something worth {} words.", "many ".repeat(i));
            let added = call("knowledge-sources/add", add_input(&agent, &format!("s{i}"), &content)).await;
            let source = added["knowledgeSource"].clone();
            let id = source["id"].as_str().unwrap().to_owned();
            let replace = |revision: &'static str, content: String| {
                call("knowledge-sources/replace", replace_input(&agent, &id, revision, &content))
            };
            let delete = || {
                let input =
                    json!({ "agentId": agent, "sourceId": id, "tombstone": true, "prune": true, "confirm": id });
                call("knowledge-sources/delete", input)
            };
            match i % 6 {
                0 => assert_eq!(promote(pending_of(&source)).await, Outcome::Promoted),
                1 => {
                    promote(pending_of(&source)).await;
                    let first = replace("r2", format!("{content} Second.")).await["knowledgeSource"].clone();
                    let second = replace("r3", format!("{content} Third, longer.")).await["knowledgeSource"].clone();
                    assert_eq!(promote(pending_of(&second)).await, Outcome::Promoted);
                    assert_eq!(promote(pending_of(&first)).await, Outcome::Skipped, "superseded");
                }
                2 => {
                    promote(pending_of(&source)).await;
                    delete().await;
                }
                3 => {
                    // Attempts spent: the worker fails it and frees its bytes.
                    let spent = Processing { max_attempts: 0, ..processing("w") };
                    let failed = process(&app.pool, pending_of(&source), &spent).await.unwrap();
                    assert_eq!(failed, Outcome::Failed("internal"));
                }
                4 => {
                    replace("r2", format!("{content} Replaced while pending.")).await;
                    delete().await;
                }
                _ => {
                    promote(pending_of(&source)).await;
                    let candidate = replace("r2", "Short.".into()).await["knowledgeSource"].clone();
                    assert_eq!(promote(pending_of(&candidate)).await, Outcome::Promoted);
                }
            }
        });
    }
    work.join_all().await;
    let (reported, counted) = usage_and_recount(&s).await;
    assert_eq!(reported, counted, "usage (sources, bytes) as reported and as the rows hold it");
    assert_eq!(reported.0, 12, "six of eighteen were deleted");
}

/// The Workspace's limits as a reservation checks them.
async fn limits(s: &Tenant) -> [i64; 5] {
    let ws = WorkspaceId::parse(&s.ws).unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    store::workspaces::hold(&mut conn, ws).await.unwrap().entitlement.limit_array()
}

type Connection = sqlx::pool::PoolConnection<sqlx::Postgres>;

/// Two connections whose own shards differ (a shard is picked by backend pid).
async fn two_writers(s: &Tenant) -> (Connection, Connection) {
    let shard = "SELECT (pg_backend_pid() % 16)::int";
    let mut first = s.app.pool.acquire().await.unwrap();
    let mine: i32 = sqlx::query_scalar(shard).fetch_one(&mut *first).await.unwrap();
    let mut others = Vec::new();
    loop {
        let mut other = s.app.pool.acquire().await.unwrap();
        let theirs: i32 = sqlx::query_scalar(shard).fetch_one(&mut *other).await.unwrap();
        if theirs != mine {
            return (first, other);
        }
        others.push(other);
    }
}

fn one_source() -> Delta {
    Delta::of(LimitKey::KnowledgeSources, 1).and(Delta::of(LimitKey::KnowledgeBytes, 100))
}

/// Adds of one Workspace hold no lock another add waits for: each takes room
/// on a shard of its own, so two reservations stand side by side uncommitted
/// (before the shards, the second waited for the first's usage row).
#[sqlx::test(migrations = "../migrations")]
async fn reservations_of_one_workspace_do_not_wait_for_each_other(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let (ws, limits) = (WorkspaceId::parse(&s.ws).unwrap(), limits(&s).await);
    // A first reservation shares out the room.
    let mut warm = s.app.pool.begin().await.unwrap();
    assert!(store::usage::reserve(&mut warm, ws, &one_source(), limits).await.unwrap());
    warm.commit().await.unwrap();

    let (mut a, mut b) = two_writers(&s).await;
    let mut a = a.begin().await.unwrap();
    let mut b = b.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '2s'").execute(&mut *b).await.unwrap();
    assert!(store::usage::reserve(&mut a, ws, &one_source(), limits).await.unwrap());
    assert!(store::usage::reserve(&mut b, ws, &one_source(), limits).await.expect("no wait for the other add"));
    b.commit().await.unwrap();
    a.commit().await.unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    let usage = store::usage::get(&mut conn, ws).await.unwrap();
    assert_eq!((usage.knowledge_sources, usage.knowledge_bytes), (3, 300));
}

/// An add that waits for another's rebalance takes the room that one shared
/// out instead of rebalancing again: a second rebalance would fold the first
/// add's usage into the row and hold every shard until its commit, sending
/// each add that finds no shard free meanwhile to the row in turn (a convoy
/// seen in `svc-bench adds` near a limit).
#[sqlx::test(migrations = "../migrations")]
async fn an_add_that_waited_for_a_rebalance_takes_the_room_it_shared_out(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let (ws, limits) = (WorkspaceId::parse(&s.ws).unwrap(), limits(&s).await);
    let (mut a, mut b) = two_writers(&s).await;
    // The Workspace's first reservation finds no room: it rebalances, holding
    // the usage row and every shard until it commits.
    let mut first = a.begin().await.unwrap();
    assert!(store::usage::reserve(&mut first, ws, &one_source(), limits).await.unwrap());
    let second = tokio::spawn(async move {
        let mut second = b.begin().await.unwrap();
        let granted = store::usage::reserve(&mut second, ws, &one_source(), limits).await.unwrap();
        second.commit().await.unwrap();
        granted
    });
    assert!(
        waits_on_a_lock(&s.app.pool, "%FROM workspace_usage WHERE%FOR UPDATE%").await,
        "the second add waits for the row"
    );
    first.commit().await.unwrap();
    assert!(second.await.unwrap());
    let (base, shards): (i64, i64) = sqlx::query_as(
        "SELECT knowledge_sources, (SELECT sum(sources) FROM workspace_usage_shards WHERE workspace_id = $1)::bigint
         FROM workspace_usage WHERE workspace_id = $1",
    )
    .bind(ws.0)
    .fetch_one(&s.app.pool)
    .await
    .unwrap();
    assert_eq!((base, shards), (0, 2), "both adds on the shards, no second rebalance folding the first");
}

/// Room escrowed to a shard another writer holds is waited for, not refused:
/// with one source of room left, on a shard held by a transaction that then
/// lets go, the reservation is granted; the next one is refused.
#[sqlx::test(migrations = "../migrations")]
async fn room_on_a_held_shard_is_waited_for_then_the_limit_refuses(pool: PgPool) {
    let s = Tenant::new(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &["knowledge_sources=2".to_owned()]).await.unwrap();
    let (ws, limits) = (WorkspaceId::parse(&s.ws).unwrap(), limits(&s).await);
    let mut first = s.app.pool.begin().await.unwrap();
    assert!(store::usage::reserve(&mut first, ws, &one_source(), limits).await.unwrap());
    first.commit().await.unwrap();
    let held: i16 = sqlx::query_scalar("SELECT shard FROM workspace_usage_shards WHERE sources_room > 0")
        .fetch_one(&s.app.pool)
        .await
        .expect("the one source of room left, on one shard");

    let mut holder = s.app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage_shards WHERE shard = $1 FOR UPDATE")
        .bind(held)
        .execute(&mut *holder)
        .await
        .unwrap();
    // Let go once the reservation below has found the room held.
    let release = tokio::spawn({
        let pool = s.app.pool.clone();
        async move {
            until_a_reservation_tries_the_shards(&pool).await;
            holder.rollback().await.unwrap();
        }
    });
    let mut second = s.app.pool.begin().await.unwrap();
    assert!(store::usage::reserve(&mut second, ws, &one_source(), limits).await.unwrap(), "granted once let go");
    second.commit().await.unwrap();
    release.await.unwrap();

    let mut third = s.app.pool.begin().await.unwrap();
    assert!(!store::usage::reserve(&mut third, ws, &one_source(), limits).await.unwrap(), "at the limit");
    third.rollback().await.unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    assert_eq!(store::usage::get(&mut conn, ws).await.unwrap().knowledge_sources, 2);
}

/// Room shared out under a limit is not used once the limit is lowered.
#[sqlx::test(migrations = "../migrations")]
async fn a_lowered_limit_takes_back_the_room_shared_out(pool: PgPool) {
    let s = Tenant::new(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &["knowledge_sources=100".to_owned()]).await.unwrap();
    s.ok("knowledge-sources/add", add_input(&s.agent, "one", "The first source.")).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &["knowledge_sources=2".to_owned()]).await.unwrap();
    s.ok("knowledge-sources/add", add_input(&s.agent, "two", "The second source.")).await;
    let third = s.call("knowledge-sources/add", add_input(&s.agent, "three", "The third source.")).await;
    let body = assert_problem(&third, 403, "limit_exceeded");
    assert_eq!(body["error"]["details"]["limit"], "knowledge_sources");
    let (reported, counted) = usage_and_recount(&s).await;
    assert_eq!(reported.0, 2);
    assert_eq!(reported, counted);
}

/// A limit lowered while an add waits for the Workspace is the limit the add
/// meets: the add holds the Workspace in its own statement, which counts the
/// source on a shard only while the Workspace has the plan and overrides the
/// call was admitted with, so room shared out under the old limit stays unused.
#[sqlx::test(migrations = "../migrations")]
async fn a_limit_lowered_while_an_add_waits_is_the_limit_it_meets(pool: PgPool) {
    let s = Tenant::new(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &[]).await.unwrap();
    s.ok("knowledge-sources/add", add_input(&s.agent, "one", "The first source.")).await;
    let mut change = s.app.pool.begin().await.unwrap();
    sqlx::query(r#"UPDATE workspaces SET limit_overrides = '{"knowledge_sources": 1}'"#)
        .execute(&mut *change)
        .await
        .unwrap();
    let add = s.spawn_call("knowledge-sources/add", add_input(&s.agent, "two", "The second source."));
    let own_statement = "%INSERT INTO knowledge_sources%";
    assert!(waits_on_a_lock(&s.app.pool, own_statement).await, "the add's statement never waited for the Workspace");
    change.commit().await.unwrap();
    let body = assert_problem(&add.await.unwrap(), 403, "limit_exceeded");
    assert_eq!(
        body["error"]["details"],
        json!({ "limit": "knowledge_sources", "max": 1, "current": 1, "requested": 1 })
    );
    let (reported, counted) = usage_and_recount(&s).await;
    assert_eq!(reported.0, 1);
    assert_eq!(reported, counted);
}

/// The add's statement counts the source on a shard when the Workspace has
/// the plan and overrides of the Room asked for, and leaves the count to the
/// caller otherwise, having written the source all the same: under another
/// plan, and under overrides equal as JSON values but not as the Entitlement
/// reads them (`100.0` is no limit: the plan's own applies).
#[sqlx::test(migrations = "../migrations")]
async fn an_add_counts_its_usage_in_its_own_statement_only_under_the_plan_it_names(pool: PgPool) {
    let s = Tenant::new(pool).await;
    let overrides = ["knowledge_sources=100".to_owned(), "knowledge_bytes=100000".to_owned()];
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &overrides).await.unwrap();
    // A first add shares out room under those limits.
    s.ok("knowledge-sources/add", add_input(&s.agent, "one", "The first source.")).await;
    let (ws, agent) = (WorkspaceId::parse(&s.ws).unwrap(), AgentId::parse(&s.agent).unwrap());
    let as_set = r#"{"knowledge_sources": 100, "knowledge_bytes": 100000}"#;
    let as_float = r#"{"knowledge_sources": 100.0, "knowledge_bytes": 100000}"#;
    for (plan, stored, sources_limit, room_taken) in
        [("pro", as_set, 100, true), ("starter", as_set, 100, false), ("pro", as_float, 10_000, false)]
    {
        let first = NewRevision {
            id: RevisionId::new(),
            source_id: SourceId::new(),
            workspace_id: ws,
            agent_id: agent,
            revision: "r1",
            digest: &digest("The second source."),
            title: "Two",
            provenance_kind: StoredProvenanceKind::Manual,
            provenance_uri: "notes",
            required: false,
            content: "The second source.",
        };
        let room = Room {
            plan,
            limit_overrides: json!({ "knowledge_bytes": 100_000, "knowledge_sources": 100 }),
            sources_limit: 100,
            bytes_limit: 100_000,
        };
        let mut tx = s.app.pool.begin().await.unwrap();
        sqlx::query("UPDATE workspaces SET limit_overrides = $1::jsonb").bind(stored).execute(&mut *tx).await.unwrap();
        let (held, added) = store::knowledge::add_source(&mut tx, "two", &first, &room, None).await.unwrap();
        assert_eq!(held.entitlement.limit(LimitKey::KnowledgeSources), sources_limit, "{plan} {stored}");
        let Added::Added { room_taken: taken, .. } = added else { panic!("{added:?}") };
        assert_eq!(taken, room_taken, "{plan} {stored}");
        let on_shards: i64 = sqlx::query_scalar("SELECT sum(sources)::bigint FROM workspace_usage_shards")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(on_shards, if room_taken { 2 } else { 1 }, "{plan} {stored}");
        tx.rollback().await.unwrap();
    }
}

/// A replace that frees a superseded candidate's bytes makes one change of
/// usage: while it waits for room escrowed to shards another writer holds, it
/// holds no usage row, so the Workspace's other writers (here one changing
/// its Agents' count, as an Agent create does) do not wait for it.
#[sqlx::test(migrations = "../migrations")]
async fn a_replace_waiting_for_room_holds_up_no_other_write(pool: PgPool) {
    let s = Tenant::new(pool).await;
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &["knowledge_bytes=1000".to_owned()]).await.unwrap();
    let added = s.ok("knowledge-sources/add", add_input(&s.agent, "doc", "Short first content.")).await;
    let id = added["knowledgeSource"]["id"].as_str().unwrap().to_owned();
    // Every shard held, as by writers at their last statement.
    let mut holder = s.app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage_shards FOR UPDATE").execute(&mut *holder).await.unwrap();
    let input = replace_input(&s.agent, &id, "r2", "A longer second content, waiting for room.");
    let replace = s.spawn_call("knowledge-sources/replace", input);
    until_a_reservation_tries_the_shards(&s.app.pool).await;
    let mut other = s.app.pool.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '100ms'").execute(&mut *other).await.unwrap();
    sqlx::query("UPDATE workspace_usage SET agents = agents WHERE workspace_id = $1::uuid")
        .bind(WorkspaceId::parse(&s.ws).unwrap().0)
        .execute(&mut *other)
        .await
        .expect("the usage row is free while the replace waits");
    other.rollback().await.unwrap();
    assert_eq!(reservations_under_way(&s.app.pool).await, 1, "the replace was still waiting for room");
    let replaced = replace.await.unwrap();
    let body = assert_problem(&replaced, 503, "internal_error");
    assert_eq!(body["error"]["details"]["reason"], "busy");
    holder.rollback().await.unwrap();
    let input = replace_input(&s.agent, &id, "r2", "A longer second content, waiting for room.");
    assert_ok("knowledge-sources/replace", &s.call("knowledge-sources/replace", input).await);
    let (reported, counted) = usage_and_recount(&s).await;
    assert_eq!(reported, counted);
}

/// A Tenant on the pro plan whose first add shared out room on the usage
/// shards, with its Workspace as an add outside a transaction is admitted
/// under (its Entitlement held, read now).
struct Ready {
    s: Tenant,
    ws: WorkspaceId,
    agent: AgentId,
    entitlement: Entitlement,
    standing: Standing,
}

impl Ready {
    async fn new(pool: PgPool) -> Self {
        let s = Tenant::new(pool).await;
        svc_core::admin::plan_set(&s.app.pool, &s.ws, "pro", &[]).await.unwrap();
        s.ok("knowledge-sources/add", add_input(&s.agent, "one", "The first source.")).await;
        let (ws, agent) = (WorkspaceId::parse(&s.ws).unwrap(), AgentId::parse(&s.agent).unwrap());
        let held = store::workspaces::hold(&mut s.app.pool.acquire().await.unwrap(), ws).await.unwrap();
        let standing = Standing::of(held.status, &held.entitlement);
        Self { s, ws, agent, entitlement: held.entitlement, standing }
    }

    fn scope(&self) -> Scope<'_> {
        Scope { workspace: self.ws, agent: self.agent, entitlement: &self.entitlement }
    }
}

/// An add of `content` under `key`, as one statement outside a transaction
/// admitted under `standing`.
async fn add_alone(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    key: &str,
    content: &str,
    ids: NewIds,
    standing: &Standing,
) -> svc_core::error::Result<Option<(SourceRow, Job)>> {
    knowledge::add_alone(conn, scope, key, &submission(content), ids, standing).await
}

/// The same add in the transaction `conn` is in.
async fn add_in(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    key: &str,
    content: &str,
    ids: NewIds,
) -> svc_core::error::Result<(SourceRow, Job)> {
    knowledge::add(conn, scope, key, &submission(content), ids, |_| Ok(())).await
}

fn notes() -> Provenance {
    Provenance { kind: ProvenanceKind::Manual, uri: "notes".to_owned() }
}

fn submission(content: &str) -> Submission {
    Submission {
        title: "Alone".to_owned(),
        provenance: notes(),
        revision: "r1".to_owned(),
        digest: digest(content),
        required: false,
        content: content.to_owned(),
    }
}

/// An add outside a transaction commits in its one statement, counted on a
/// shard, when the Workspace is as the call was admitted under; under a
/// Workspace that changed since (archived, its trial or period, its
/// cancellation) it writes nothing, and the add in a transaction answers.
#[sqlx::test(migrations = "../migrations")]
async fn an_add_alone_writes_only_under_the_workspace_it_was_admitted_under(pool: PgPool) {
    let r = Ready::new(pool).await;
    let (s, standing) = (&r.s, r.standing);
    let content = "Added in one statement.";
    let mut conn = s.app.pool.acquire().await.unwrap();
    let archived = Standing { status: StoredWorkspaceStatus::Archived, ..standing };
    let trial = Standing { trial_end: Some(sqlx::types::time::OffsetDateTime::UNIX_EPOCH), ..standing };
    let period = Standing { period_end: Some(sqlx::types::time::OffsetDateTime::UNIX_EPOCH), ..standing };
    let cancelling = Standing { cancel_at_period_end: !standing.cancel_at_period_end, ..standing };
    for changed in [archived, trial, period, cancelling] {
        let added = add_alone(&mut conn, r.scope(), "alone", content, NewIds::fresh(), &changed).await.unwrap();
        assert!(added.is_none(), "{changed:?}");
    }
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'alone'").await, 0);
    let ids = NewIds::fresh();
    let (row, _) = add_alone(&mut conn, r.scope(), "alone", content, ids, &standing)
        .await
        .unwrap()
        .expect("added in its own statement");
    assert_eq!(row.id, ids.source);
    // Committed: another session sees it, counted on a shard.
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'alone'").await, 1);
    let (reported, counted) = usage_and_recount(s).await;
    assert_eq!(reported, counted);
    assert_eq!(reported.0, 2);
}

/// An add outside a transaction that inserted its source and then found no
/// shard to count it on (here every shard is held by another transaction)
/// fails its statement, so nothing of it stays.
#[sqlx::test(migrations = "../migrations")]
async fn an_add_alone_that_finds_no_room_writes_nothing(pool: PgPool) {
    let r = Ready::new(pool).await;
    let s = &r.s;
    let content = "Never counted.";
    let digest = digest(content);
    let mut shards = s.app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspace_usage_shards FOR UPDATE").execute(&mut *shards).await.unwrap();
    let mut conn = s.app.pool.acquire().await.unwrap();
    // The statement itself fails, having inserted the source.
    let first = NewRevision {
        id: RevisionId::new(),
        source_id: SourceId::new(),
        workspace_id: r.ws,
        agent_id: r.agent,
        revision: "r1",
        digest: &digest,
        title: "Alone",
        provenance_kind: StoredProvenanceKind::Manual,
        provenance_uri: "notes",
        required: false,
        content,
    };
    let room = Room::under(&r.entitlement);
    let failed = store::knowledge::add_source(&mut conn, "alone", &first, &room, Some(&r.standing)).await;
    let Err(sqlx::Error::Database(error)) = failed else { panic!("the statement did not fail") };
    assert_eq!(error.code().as_deref(), Some(store::knowledge::UNCOUNTED));
    let added = add_alone(&mut conn, r.scope(), "alone", content, NewIds::fresh(), &r.standing).await.unwrap();
    assert!(added.is_none());
    shards.rollback().await.unwrap();
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'alone'").await, 0);
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_revisions WHERE title = 'Alone'").await, 0);
    let (reported, counted) = usage_and_recount(s).await;
    assert_eq!(reported, counted);
    assert_eq!(reported.0, 1);
}

/// An attempt whose outcome was lost with its connection may have written the
/// source: the add in a transaction that follows, with the call's ids, finds
/// it and answers it as added, counted once (not `key_exists`).
#[sqlx::test(migrations = "../migrations")]
async fn an_add_finds_what_an_attempt_of_the_same_call_wrote(pool: PgPool) {
    let r = Ready::new(pool).await;
    let s = &r.s;
    let content = "Written once, answered twice.";
    let ids = NewIds::fresh();
    let mut conn = s.app.pool.acquire().await.unwrap();
    let first = add_alone(&mut conn, r.scope(), "twice", content, ids, &r.standing).await.unwrap().expect("written");
    let mut tx = s.app.pool.begin().await.unwrap();
    let (again, job) = add_in(&mut tx, r.scope(), "twice", content, ids).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!((again.id, again.candidate_id), (first.0.id, Some(ids.revision)));
    assert_eq!(job, first.1);
    // Another call's ids find the key taken.
    let mut tx = s.app.pool.begin().await.unwrap();
    let other = add_in(&mut tx, r.scope(), "twice", content, NewIds::fresh()).await;
    let Err(svc_core::error::Error::Problem(problem)) = other else { panic!("{other:?}") };
    assert_eq!(problem.code, ProblemCode::InvalidRequest);
    tx.rollback().await.unwrap();
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'twice'").await, 1);
    let (reported, counted) = usage_and_recount(s).await;
    assert_eq!(reported, counted);
    assert_eq!(reported.0, 2);
}

/// An archive committing while an add waits for the Workspace in its own
/// statement (outside a transaction, room on the shards ready) stops it.
#[sqlx::test(migrations = "../migrations")]
async fn an_archive_committing_while_an_add_alone_waits_stops_it(pool: PgPool) {
    let s = Ready::new(pool).await.s;
    let mut archive = s.app.pool.begin().await.unwrap();
    sqlx::query("UPDATE workspaces SET status = 'archived'").execute(&mut *archive).await.unwrap();
    let add = s.spawn_call("knowledge-sources/add", add_input(&s.agent, "two", "The second source."));
    assert!(waits_on_a_lock(&s.app.pool, "%INSERT INTO knowledge_sources%").await, "the add never waited");
    archive.commit().await.unwrap();
    assert_problem(&add.await.unwrap(), 409, "workspace_archived");
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources").await, 1);
}

/// An earlier attempt of the call still running (its connection lost to the
/// client, not to the server) and the transaction that follows insert the
/// same ids: the second waits for the first and then finds the source its own.
/// (Here the attempt inserted first, so they meet on the key's index, the
/// arbiter before the change too; two that pass PostgreSQL's check at once
/// meet on the id's, which no test here times.)
#[sqlx::test(migrations = "../migrations")]
async fn an_add_meeting_an_attempt_still_running_finds_it_once_committed(pool: PgPool) {
    let r = Ready::new(pool).await;
    let (s, ws, agent) = (&r.s, r.ws, r.agent);
    let content = "Raced by its own attempt.";
    let ids = NewIds::fresh();
    let add = |pool: PgPool, entitlement: Entitlement| async move {
        let mut tx = pool.begin().await.unwrap();
        let scope = Scope { workspace: ws, agent, entitlement: &entitlement };
        let added = add_in(&mut tx, scope, "race", content, ids).await.map(|(row, _)| row.id);
        (tx, added)
    };
    let (attempt, first) = add(s.app.pool.clone(), r.entitlement.clone()).await;
    assert_eq!(first.unwrap(), ids.source);
    let retry = tokio::spawn(add(s.app.pool.clone(), r.entitlement.clone()));
    assert!(waits_on_a_lock(&s.app.pool, "%INSERT INTO knowledge_sources%").await, "the retry never waited");
    attempt.commit().await.unwrap();
    let (retry_tx, again) = retry.await.unwrap();
    assert_eq!(again.unwrap(), ids.source, "the attempt's source, answered as added");
    retry_tx.commit().await.unwrap();
    assert_eq!(s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'race'").await, 1);
    let (reported, counted) = usage_and_recount(s).await;
    assert_eq!(reported, counted);
    assert_eq!(reported.0, 2);
}

/// The insert does nothing on a conflict with any unique index, the id's too:
/// a retry whose attempt committed and whose source was deleted since (the
/// key free again, the id not) is refused for the key, not a unique
/// violation (a 500).
#[sqlx::test(migrations = "../migrations")]
async fn a_retry_finding_its_id_taken_is_refused_not_a_unique_violation(pool: PgPool) {
    let r = Ready::new(pool).await;
    let s = &r.s;
    let content = "Added, then deleted.";
    let ids = NewIds::fresh();
    let mut conn = s.app.pool.acquire().await.unwrap();
    add_alone(&mut conn, r.scope(), "gone", content, ids, &r.standing).await.unwrap().expect("written");
    let source = ids.source.to_string();
    let deleted =
        json!({ "agentId": s.agent, "sourceId": source, "tombstone": true, "prune": true, "confirm": source });
    s.ok("knowledge-sources/delete", deleted).await;
    let mut tx = s.app.pool.begin().await.unwrap();
    let retry = add_in(&mut tx, r.scope(), "gone", content, ids).await;
    let Err(svc_core::error::Error::Problem(problem)) = retry else { panic!("{retry:?}") };
    assert_eq!(problem.code, ProblemCode::InvalidRequest);
    assert_eq!(problem.details.as_ref().and_then(|d| d.get("reason")), Some(&json!("key_exists")), "{problem:?}");
    tx.rollback().await.unwrap();
    assert_eq!(
        s.app.count("SELECT count(*) FROM knowledge_sources WHERE key = 'gone' AND deleted_at IS NULL").await,
        0
    );
}

/// Transactions that have tried to take room on the usage shards and not
/// ended (a reservation's UPDATE holds the table in ROW EXCLUSIVE mode until
/// its transaction ends, whether or not it found a shard; a holder of the
/// shards' rows holds it in ROW SHARE mode only).
async fn reservations_under_way(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE c.relname = 'workspace_usage_shards' AND l.mode = 'RowExclusiveLock' AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits (up to 30 s) until a reservation is under way on the usage shards.
async fn until_a_reservation_tries_the_shards(pool: &PgPool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reservations_under_way(pool).await == 0 {
        assert!(std::time::Instant::now() < deadline, "no reservation ever tried the shards");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
