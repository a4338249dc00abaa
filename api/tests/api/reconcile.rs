//! knowledge_source.reconcile: plans, tombstones, limits, applied runs (driven
//! here by calling the worker's apply step directly), replays and big manifests.

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::ids::{RevisionId, RunId};
use svc_core::knowledge::process;
use svc_core::reconcile::{Applied, apply};

use crate::helpers::{TestApp, TestUser, assert_ok, assert_problem};
use crate::knowledge::processing;

fn upsert(key: &str, content: &str) -> Value {
    json!({
        "key": key, "title": format!("Title {key}"), "provenance": { "kind": "repository", "uri": format!("kb/{key}.md") },
        "revision": "r1", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()), "content": content,
    })
}

fn tombstone(key: &str, confirm: Option<&str>) -> Value {
    let mut entry = json!({ "key": key, "tombstone": true });
    if let Some(confirm) = confirm {
        entry["confirm"] = json!(confirm);
    }
    entry
}

struct Setup {
    app: TestApp,
    owner: TestUser,
    ws: String,
    agent: String,
}

async fn setup(pool: PgPool) -> Setup {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    svc_core::admin::plan_set(&app.pool, &ws, "pro", &[]).await.unwrap();
    let agent = app.agent(&owner, &ws, "Helper").await;
    Setup { app, owner, ws, agent }
}

impl Setup {
    fn input(&self, sources: Vec<Value>, dry_run: bool, prune: bool) -> Value {
        json!({ "agentId": self.agent, "manifest": { "version": 1, "sources": sources }, "dryRun": dry_run, "prune": prune })
    }

    async fn reconcile(&self, input: Value) -> svc_tests::http::TestResponse {
        self.app.op("knowledge-sources/reconcile", &self.owner.token, Some(&self.ws), input).await
    }

    async fn ok(&self, input: Value) -> Value {
        assert_ok("knowledge-sources/reconcile", &self.reconcile(input).await)
    }

    /// Applies whatever is applying, then processes every pending revision.
    async fn settle(&self, run: &Value) {
        let run = RunId::parse(run["runId"].as_str().unwrap()).unwrap();
        apply(&self.app.pool, run, None, usize::MAX).await.unwrap();
        let pending: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT id FROM knowledge_revisions WHERE state = 'pending' ORDER BY id")
                .fetch_all(&self.app.pool)
                .await
                .unwrap();
        for revision in pending {
            process(&self.app.pool, RevisionId(revision), &processing("test")).await.unwrap();
        }
    }

    /// The id of the live source with `key`.
    async fn source_id(&self, key: &str) -> String {
        let listed = self
            .app
            .op("knowledge-sources/list", &self.owner.token, Some(&self.ws), json!({ "agentId": self.agent }))
            .await;
        let listed = assert_ok("knowledge-sources/list", &listed);
        let source = listed["knowledgeSources"].as_array().unwrap().iter().find(|k| k["key"] == key).cloned();
        source.unwrap()["id"].as_str().unwrap().to_owned()
    }

    async fn count(&self, sql: &'static str) -> i64 {
        self.app.count(sql).await
    }
}

fn actions(run: &Value) -> Vec<(String, String)> {
    run["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["key"].as_str().unwrap().into(), p["action"].as_str().unwrap().into()))
        .collect()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_dry_run_changes_nothing_and_an_apply_converges(pool: PgPool) {
    let s = setup(pool).await;
    let manifest = vec![upsert("a", "Alpha text."), upsert("b", "Beta text."), upsert("c", "Gamma text.")];
    let planned = s.ok(s.input(manifest.clone(), true, false)).await;
    assert_eq!(
        (planned["status"].clone(), planned["runId"].clone(), planned["dryRun"].clone()),
        (json!("planned"), Value::Null, json!(true))
    );
    assert_eq!(actions(&planned), [("a".into(), "add".into()), ("b".into(), "add".into()), ("c".into(), "add".into())]);
    assert_eq!(
        s.count("SELECT count(*) FROM knowledge_sources").await + s.count("SELECT count(*) FROM reconcile_runs").await,
        0
    );

    let mut input = s.input(manifest.clone(), false, false);
    input["idempotencyKey"] = json!("apply-0001");
    let applying = s.ok(input.clone()).await;
    assert_eq!((applying["status"].clone(), applying["checkpoint"].clone()), (json!("applying"), json!(0)));
    assert!(applying["runId"].as_str().unwrap().starts_with("run_"));
    s.settle(&applying).await;
    // Polling by replay: the same request answers the run as it stands.
    let replayed = s.reconcile(input).await;
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    let done = assert_ok("knowledge-sources/reconcile", &replayed);
    assert_eq!((done["status"].clone(), done["checkpoint"].clone()), (json!("completed"), json!(3)));
    let states: Vec<&str> =
        done["knowledgeSources"].as_array().unwrap().iter().map(|k| k["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["active", "active", "active"]);
    assert!(done["plan"].as_array().unwrap().iter().all(|p| p["sourceId"].as_str().unwrap().starts_with("ks_")));
    // The same manifest again: all noop, completed at once.
    let again = s.ok(s.input(manifest, false, false)).await;
    assert_eq!(actions(&again).iter().filter(|(_, a)| a == "noop").count(), 3);
    assert_eq!((again["status"].clone(), again["checkpoint"].clone()), (json!("completed"), json!(3)));
    assert_eq!(s.count("SELECT count(*) FROM knowledge_revisions").await, 3);
}

#[sqlx::test(migrations = "../migrations")]
async fn plans_compare_each_key_and_leave_others_alone(pool: PgPool) {
    let s = setup(pool).await;
    let first = s
        .ok(s.input(
            vec![upsert("same", "S."), upsert("changed", "Old."), upsert("gone", "G."), upsert("other", "O.")],
            false,
            false,
        ))
        .await;
    s.settle(&first).await;
    let gone = s.source_id("gone").await;
    let manifest = vec![
        upsert("same", "S."),
        upsert("changed", "New."),
        upsert("new", "N."),
        tombstone("gone", Some(&gone)),
        tombstone("never", Some("ks_x")),
    ];
    let run = s.ok(s.input(manifest, false, true)).await;
    assert_eq!(
        actions(&run),
        [
            ("same".into(), "noop".into()),
            ("changed".into(), "replace".into()),
            ("new".into(), "add".into()),
            ("gone".into(), "delete".into()),
            ("never".into(), "noop".into())
        ]
    );
    assert_eq!(run["plan"][4]["sourceId"], Value::Null);
    s.settle(&run).await;
    let listed = assert_ok(
        "knowledge-sources/list",
        &s.app.op("knowledge-sources/list", &s.owner.token, Some(&s.ws), json!({ "agentId": s.agent })).await,
    );
    let mut keys: Vec<&str> =
        listed["knowledgeSources"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    keys.sort();
    assert_eq!(keys, ["changed", "new", "other", "same"], "omitted keys are untouched");
    assert_eq!(svc_tests::knowledge::assert_sources_show_their_revisions(&s.app.pool).await, 4);
}

#[sqlx::test(migrations = "../migrations")]
async fn tombstones_need_prune_and_the_exact_id(pool: PgPool) {
    let s = setup(pool).await;
    let first = s.ok(s.input(vec![upsert("doomed", "D.")], false, false)).await;
    s.settle(&first).await;
    let id = s.source_id("doomed").await;
    for dry_run in [true, false] {
        for (confirm, prune) in [(Some(id.as_str()), false), (Some("ks_wrong"), true), (None, true)] {
            let response = s.reconcile(s.input(vec![tombstone("doomed", confirm)], dry_run, prune)).await;
            let body = assert_problem(&response, 428, "confirmation_required");
            assert_eq!(body["error"]["details"]["deletions"], json!([{ "key": "doomed", "sourceId": id }]));
        }
    }
    assert_eq!(s.count("SELECT count(*) FROM reconcile_runs").await, 1);
    let run = s.ok(s.input(vec![tombstone("doomed", Some(&id))], false, true)).await;
    s.settle(&run).await;
    assert_eq!(s.count("SELECT count(*) FROM knowledge_sources WHERE deleted_at IS NULL").await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn manifests_are_checked_whole_before_anything_is_written(pool: PgPool) {
    let s = setup(pool).await;
    let body = assert_problem(
        &s.reconcile(s.input(vec![upsert("k", "x"), upsert("k", "y")], true, false)).await,
        400,
        "invalid_request",
    );
    assert_eq!(body["error"]["details"]["reason"], "duplicate_key");
    let mut wrong = upsert("k", "x");
    wrong["digest"] = json!(svc_contract::digest::sha256_prefixed(b"y"));
    let body = assert_problem(
        &s.reconcile(s.input(vec![upsert("ok", "fine"), wrong], false, false)).await,
        400,
        "invalid_request",
    );
    assert_eq!(
        (body["error"]["details"]["reason"].clone(), body["error"]["details"]["path"].clone()),
        (json!("digest_mismatch"), json!("/manifest/sources/1/digest"))
    );
    let many: Vec<Value> = (0..101).map(|i| upsert(&format!("k{i}"), "x")).collect();
    assert_problem(&s.reconcile(s.input(many, true, false)).await, 400, "invalid_request");
    let hundred: Vec<Value> = (0..100).map(|i| upsert(&format!("k{i}"), "x")).collect();
    assert_ok("knowledge-sources/reconcile", &s.reconcile(s.input(hundred, true, false)).await);
    svc_core::admin::plan_set(&s.app.pool, &s.ws, "trial", &["knowledge_sources=2".into()]).await.unwrap();
    for dry_run in [true, false] {
        let three = vec![upsert("x", "1"), upsert("y", "2"), upsert("z", "3")];
        let body = assert_problem(&s.reconcile(s.input(three, dry_run, false)).await, 403, "limit_exceeded");
        assert_eq!(body["error"]["details"]["limit"], "knowledge_sources");
        assert_eq!(body["error"]["details"]["requested"], 3);
    }
    assert_eq!(
        s.count("SELECT count(*) FROM knowledge_sources").await + s.count("SELECT count(*) FROM reconcile_runs").await,
        0
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn runs_of_one_agent_apply_in_submission_order(pool: PgPool) {
    let s = setup(pool).await;
    let first = s.ok(s.input(vec![upsert("k", "Version one.")], false, false)).await;
    let mut second_entry = upsert("k", "Version two.");
    second_entry["revision"] = json!("r2");
    let second = s.ok(s.input(vec![second_entry], false, false)).await;
    assert_eq!(actions(&second), [("k".into(), "add".into())], "planned before the first applied");
    // The second run's job arrives first: the first run is applied before it.
    let run = RunId::parse(second["runId"].as_str().unwrap()).unwrap();
    assert_eq!(apply(&s.app.pool, run, None, usize::MAX).await.unwrap(), Applied::Done);
    let revisions: Vec<String> = sqlx::query_scalar("SELECT revision FROM knowledge_revisions ORDER BY id")
        .fetch_all(&s.app.pool)
        .await
        .unwrap();
    assert_eq!(revisions, ["r1", "r2"], "in submission order, each once");
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status::text FROM reconcile_runs ORDER BY id").fetch_all(&s.app.pool).await.unwrap();
    assert_eq!(statuses, ["completed", "completed"]);
    let applied: Vec<Option<String>> =
        sqlx::query_scalar("SELECT applied_action::text FROM reconcile_entries ORDER BY run_id")
            .fetch_all(&s.app.pool)
            .await
            .unwrap();
    assert_eq!(applied, [Some("add".to_owned()), Some("replace".to_owned())], "re-evaluated at apply time");
    let _ = first;
}

/// A job applies a bounded number of entries, then takes its turn again
/// behind other work (the worker sends it again on `More`).
#[sqlx::test(migrations = "../migrations")]
async fn a_job_applies_a_bounded_slice_of_a_run(pool: PgPool) {
    let s = setup(pool).await;
    let entries = (0..5).map(|i| upsert(&format!("k{i}"), &format!("Entry {i}."))).collect();
    let run = s.ok(s.input(entries, false, false)).await;
    let run = RunId::parse(run["runId"].as_str().unwrap()).unwrap();
    let applied = || s.count("SELECT count(*) FROM knowledge_sources");
    assert_eq!(apply(&s.app.pool, run, None, 2).await.unwrap(), Applied::More);
    assert_eq!(applied().await, 2);
    assert_eq!(apply(&s.app.pool, run, None, 2).await.unwrap(), Applied::More);
    assert_eq!(applied().await, 4);
    assert_eq!(apply(&s.app.pool, run, None, 2).await.unwrap(), Applied::Done);
    assert_eq!(applied().await, 5);
    assert_eq!(s.count("SELECT count(*) FROM reconcile_runs WHERE status = 'completed'").await, 1);
    assert_eq!(apply(&s.app.pool, run, None, 2).await.unwrap(), Applied::Nothing, "a late job finds it done");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_manifest_of_a_hundred_big_sources_is_accepted_on_both_surfaces(pool: PgPool) {
    let s = setup(pool).await;
    let content = "a".repeat(750_000);
    let sources: Vec<Value> = (0..100).map(|i| upsert(&format!("big-{i}"), &content)).collect();
    let input = s.input(sources, true, false);
    let planned = s.ok(input.clone()).await;
    assert_eq!(planned["plan"].as_array().unwrap().len(), 100);
    let response = s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_reconcile", input).await;
    let result = &response.json()["result"];
    assert_eq!(result["isError"], false, "{}", &response.text()[..response.text().len().min(500)]);
    assert_eq!(result["structuredContent"]["data"]["plan"].as_array().unwrap().len(), 100);
}

#[sqlx::test(migrations = "../migrations")]
async fn replays_over_mcp_read_the_live_run(pool: PgPool) {
    let s = setup(pool).await;
    let mut input = s.input(vec![upsert("m", "Over MCP.")], false, false);
    input["idempotencyKey"] = json!("mcp-apply-1");
    let call = |input: Value| s.app.tool(&s.owner.token, Some(&s.ws), "svc_knowledge_source_reconcile", input);
    let first = call(input.clone()).await.json()["result"]["structuredContent"]["data"].clone();
    assert_eq!(first["status"], "applying");
    s.settle(&first).await;
    let again = call(input).await.json()["result"]["structuredContent"]["data"].clone();
    assert_eq!((again["status"].clone(), again["checkpoint"].clone()), (json!("completed"), json!(1)));
}
