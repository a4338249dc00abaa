//! Fairness across Workspaces: Workspace A adds a backlog (60 sources of
//! 750,000 bytes from 8 clients); the moment A's last add is answered,
//! Workspace B adds one 2,000-byte source and polls `knowledge_source.wait`.
//! Printed: B's time from add to active, A's drain (first add to all active)
//! and their ratio, with 1 and 2 real `svc-worker` processes. Then the cost of
//! one look at the turn order with 10,000 revisions pending across 1,000
//! Workspaces, before and after `ANALYZE`.
//!
//! `cargo build --release --workspace --bins &&
//!  target/release/svc-bench fairness [--sources 60] [--bytes 750000] [--workers 1,2]
//!  [--senders 8] [--workspaces 1000] [--pending 10000] [--corpus PATH] [--compare WORKER,...]`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::common::Stack;
use crate::corpus;
use crate::ingest::documents;

/// `svc-bench fairness`.
#[derive(clap::Args)]
pub struct Options {
    /// Sources in Workspace A's backlog.
    #[arg(long, default_value_t = 60, value_name = "N")]
    sources: usize,
    /// Size of each of A's sources, at most (bytes).
    #[arg(long, default_value_t = 750_000, value_name = "N")]
    bytes: usize,
    /// Real svc-worker processes, one scenario per number (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_name = "N,N")]
    workers: Vec<usize>,
    /// Clients adding A's backlog at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    senders: usize,
    /// Workspaces the pending revisions are spread over, for the cost of a look at the turn order.
    #[arg(long, default_value_t = 1_000, value_name = "N")]
    workspaces: i64,
    /// Pending revisions, for the cost of a look at the turn order.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pending: i64,
    /// The corpus.jsonl the sources' text is drawn from.
    #[arg(long, default_value_os_t = corpus::default_path(), value_name = "PATH")]
    corpus: PathBuf,
    /// Other builds' svc-worker binaries to run the same scenario with, beside
    /// this build's (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "WORKER,WORKER")]
    compare: Vec<PathBuf>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let backlog = documents(&options.corpus, options.sources, options.bytes)?;
    let small = documents(&options.corpus, 1, 2_000)?.remove(0);
    println!(
        "svc-bench fairness: A adds {} sources of {} bytes from {} clients, then B adds one of {} bytes; {} cores",
        backlog.len(),
        options.bytes,
        options.senders,
        small.content.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let own = std::env::current_exe()?.with_file_name("svc-worker");
    println!("\n| worker | workers | B: add to active | A: drain | ratio |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for workers in &options.workers {
        for binary in std::iter::once(&own).chain(&options.compare) {
            let (b, a) = scenario(&backlog, &small, *workers, options.senders, binary).await?;
            let name = if binary == &own { "this build".to_owned() } else { binary.display().to_string() };
            println!("| {name} | {workers} | {b:.2} s | {a:.1} s | {:.3} |", b / a);
        }
    }
    claim_cost(options.workspaces, options.pending).await
}

/// B's seconds from add to active, and A's from first add to all active.
async fn scenario(
    backlog: &[crate::ingest::Document],
    small: &crate::ingest::Document,
    workers: usize,
    senders: usize,
    binary: &std::path::Path,
) -> anyhow::Result<(f64, f64)> {
    let stack = Stack::start_with(&format!("fairness{workers}"), workers, binary).await?;
    let (b_workspace, b_agent) = second_workspace(&stack).await?;
    let started = Instant::now();
    let sources = backlog.iter().map(|d| (d.key.clone(), d.title.clone(), d.content.clone())).collect();
    stack.add_all(sources, senders).await?;
    let b_added = Instant::now();
    let input = json!({
        "agentId": b_agent, "key": "small", "title": small.title,
        "provenance": { "kind": "repository", "uri": "docs/small" },
        "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(small.content.as_bytes()),
        "content": small.content,
    });
    let added = stack.op("knowledge-sources/add", Some(&b_workspace), &input).await?;
    let source = added["knowledgeSource"]["id"].as_str().context("a source")?.to_owned();
    // Polled every 50 ms rather than as `retryAfterMs` says, which grows with
    // the backlog: the figure is when the source became active, not a client's
    // polling interval.
    loop {
        let waited = stack
            .op("knowledge-sources/wait", Some(&b_workspace), &json!({ "agentId": b_agent, "sourceId": source }))
            .await?;
        if waited["terminal"] == true {
            anyhow::ensure!(waited["knowledgeSource"]["state"] == "active", "{waited}");
            break;
        }
        anyhow::ensure!(b_added.elapsed() < Duration::from_secs(3600), "B's source not active in an hour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b_secs = b_added.elapsed().as_secs_f64();
    stack.wait_active(backlog.len() as i64 + 1).await?;
    let a_secs = started.elapsed().as_secs_f64();
    eprintln!("{workers} worker(s): B active {b_secs:.2} s after its add; A drained in {a_secs:.1} s");
    stack.stop().await?;
    Ok((b_secs, a_secs))
}

/// A second Workspace of the stack's User, on the pro plan, with an Agent.
async fn second_workspace(stack: &Stack) -> anyhow::Result<(String, String)> {
    let created = stack.op("workspaces/create", None, &json!({ "name": "B" })).await?;
    let workspace = created["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
    svc_core::admin::plan_set(&stack.pool, &workspace, "pro", &[]).await?;
    let agent = stack.op("agents/create", Some(&workspace), &json!({ "name": "B" })).await?;
    Ok((workspace, agent["agent"]["id"].as_str().context("an Agent")?.to_owned()))
}

/// Times `store::knowledge::next_in_turn` with `pending` revisions spread over
/// `workspaces` Workspaces (copies of one real Workspace, Agent, source and
/// revision), before and after `ANALYZE`.
async fn claim_cost(workspaces: i64, pending: i64) -> anyhow::Result<()> {
    let stack = Stack::start("claims", 0).await?;
    let content = "A small source about opening hours.";
    let input = json!({
        "agentId": stack.agent, "key": "seed", "title": "Seed",
        "provenance": { "kind": "repository", "uri": "docs/seed" },
        "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()), "content": content,
    });
    stack.op("knowledge-sources/add", Some(&stack.workspace), &input).await?;
    let per = (pending / workspaces).max(1);
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TEMP TABLE spaces AS
             SELECT gen_random_uuid() AS ws, gen_random_uuid() AS agent, n FROM generate_series(1, {workspaces}) n;
         INSERT INTO workspaces
             SELECT (jsonb_populate_record(NULL::workspaces,
                     to_jsonb(w) || jsonb_build_object('id', s.ws, 'slug', w.slug || '-' || s.n))).*
             FROM workspaces w CROSS JOIN spaces s;
         INSERT INTO agents
             SELECT (jsonb_populate_record(NULL::agents,
                     to_jsonb(a) || jsonb_build_object('id', s.agent, 'workspace_id', s.ws))).*
             FROM agents a CROSS JOIN spaces s;
         CREATE TEMP TABLE copies AS
             SELECT s.ws, s.agent, gen_random_uuid() AS source, gen_random_uuid() AS revision, i,
                    now() - make_interval(secs => random() * 3600) AS imported_at
             FROM spaces s CROSS JOIN generate_series(1, {per}) i;
         BEGIN;
         SET CONSTRAINTS ALL DEFERRED;
         INSERT INTO knowledge_sources
             SELECT (jsonb_populate_record(NULL::knowledge_sources, to_jsonb(k) || jsonb_build_object(
                     'id', c.source, 'workspace_id', c.ws, 'agent_id', c.agent, 'key', 'copy-' || c.i,
                     'latest_revision_id', c.revision, 'candidate_revision_id', c.revision))).*
             FROM knowledge_sources k CROSS JOIN copies c;
         INSERT INTO knowledge_revisions
             SELECT (jsonb_populate_record(NULL::knowledge_revisions, to_jsonb(r) || jsonb_build_object(
                     'id', c.revision, 'source_id', c.source, 'workspace_id', c.ws, 'agent_id', c.agent,
                     'imported_at', c.imported_at))).*
             FROM knowledge_revisions r CROSS JOIN copies c;
         COMMIT;
         INSERT INTO workspace_turns SELECT ws, now() - make_interval(secs => random() * 600) FROM spaces;"
    )))
    .execute(&stack.pool)
    .await
    .context("copying the seed Workspace")?;
    let (revisions, spread): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT workspace_id) FROM knowledge_revisions WHERE state = 'pending'",
    )
    .fetch_one(&stack.pool)
    .await?;
    println!(
        "\nOne look at the turn order (`next_in_turn`, 4 candidates), {revisions} revisions pending across {spread} Workspaces:\n"
    );
    println!("| statistics | p50 ms | p99 ms |");
    println!("| --- | ---: | ---: |");
    for analyzed in [false, true] {
        if analyzed {
            sqlx::raw_sql("ANALYZE").execute(&stack.pool).await?;
        }
        let mut conn = svc_core::runtime::connection(&stack.pool).await?;
        let mut times = Vec::new();
        for _ in 0..200 {
            let started = Instant::now();
            let next = svc_core::store::knowledge::next_in_turn(&mut conn, 4).await?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            anyhow::ensure!(next.len() == 4, "{next:?}");
        }
        times.sort_by(f64::total_cmp);
        let name = if analyzed { "after ANALYZE" } else { "none (never analyzed)" };
        println!("| {name} | {:.2} | {:.2} |", times[times.len() / 2], times[times.len() * 99 / 100]);
    }
    stack.stop().await
}

impl Stack {
    /// Calls an operation as the stack's User; its `data` (the status must be 200).
    async fn op(&self, path: &str, workspace: Option<&str>, input: &Value) -> anyhow::Result<Value> {
        let response =
            self.client.post_json(&format!("/api/public/operations/{path}"), Some(&self.token), workspace, input).await;
        anyhow::ensure!(response.status == 200, "{path}: {}", response.text());
        Ok(response.json()["data"].clone())
    }
}
