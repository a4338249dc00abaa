//! Reconcile: a manifest of 100 sources of 750,000 bytes.
//!
//! - Applied to an empty Agent: seconds from the apply call to every source
//!   active, with 1 and 2 `svc-worker` processes, beside the ingest limit (the
//!   same passages COPY'd into PostgreSQL) measured in the same run.
//! - Planned (dry run) against an Agent that already has those sources (all
//!   noop): the whole call over HTTP, 75 MB of JSON included.
//!
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p svc-bench -- reconcile [--workers 1,2] [--plans 5]`

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Stack;
use crate::corpus;
use crate::ingest::{Document, copy_limit, documents};

/// `svc-bench reconcile`.
#[derive(clap::Args)]
pub struct Options {
    /// Real svc-worker processes, one apply per number (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_name = "N,N")]
    workers: Vec<usize>,
    /// Dry-run plans of the whole manifest against the Agent that holds it.
    #[arg(long, default_value_t = 5, value_name = "N")]
    plans: usize,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let Options { workers, plans } = options;
    let documents = documents(&corpus::default_path(), 100, 750_000)?;
    let mb = documents.iter().map(|d| d.content.len()).sum::<usize>() as f64 / 1e6;
    println!("svc-bench reconcile: a manifest of {} sources, {mb:.1} MB", documents.len());
    let (limit, _) = copy_limit(&documents).await?;
    println!("\n| run | seconds | MB/s | of limit |\n| --- | ---: | ---: | ---: |");
    println!("| COPY of the same passages (limit) | {limit:.1} | {:.2} | 100% |", mb / limit);
    let mut plan_times = Vec::new();
    for (i, n) in workers.iter().enumerate() {
        let stack = Stack::start(&format!("reconcile{n}"), *n).await?;
        let body = manifest(&stack, &documents, false);
        let started = Instant::now();
        let applied = stack
            .client
            .post_json(
                "/api/public/operations/knowledge-sources/reconcile",
                Some(&stack.token),
                Some(&stack.workspace),
                &body,
            )
            .await;
        anyhow::ensure!(applied.status == 200, "{}", applied.text());
        stack.wait_active(documents.len() as i64).await?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "| apply, {n} worker{} | {secs:.1} | {:.2} | {:.0}% |",
            if *n == 1 { "" } else { "s" },
            mb / secs,
            100.0 * limit / secs
        );
        if i == 0 {
            // The same manifest again, planned: every entry is a noop.
            let body = manifest(&stack, &documents, true).to_string();
            for _ in 0..plans {
                let started = Instant::now();
                let planned = stack
                    .client
                    .send(
                        hyper::Method::POST,
                        "/api/public/operations/knowledge-sources/reconcile",
                        &[
                            ("authorization", &format!("Bearer {}", stack.token)),
                            ("svc-workspace", &stack.workspace),
                            ("content-type", "application/json"),
                        ],
                        body.clone(),
                    )
                    .await;
                plan_times.push(started.elapsed());
                let json = planned.json();
                anyhow::ensure!(planned.status == 200, "{}", planned.text());
                let noops =
                    json["data"]["plan"].as_array().map_or(0, |p| p.iter().filter(|e| e["action"] == "noop").count());
                anyhow::ensure!(noops == documents.len(), "expected all noop, got {noops}");
            }
        }
        stack.stop().await?;
    }
    plan_times.sort_unstable();
    let median = plan_times.get(plan_times.len() / 2).copied().unwrap_or(Duration::ZERO);
    println!(
        "\ndry-run plan of the same manifest against its 100 sources (all noop), over HTTP: median {:.0} ms of {} (min {:.0} ms, max {:.0} ms)",
        median.as_secs_f64() * 1e3,
        plan_times.len(),
        plan_times.first().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        plan_times.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
    );
    Ok(())
}

fn manifest(stack: &Stack, documents: &[Document], dry_run: bool) -> Value {
    let sources: Vec<Value> = documents
        .iter()
        .map(|d| {
            json!({ "key": d.key, "title": d.title, "provenance": { "kind": "repository", "uri": format!("docs/{}", d.key) },
                    "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(d.content.as_bytes()), "content": d.content })
        })
        .collect();
    json!({ "agentId": stack.agent, "manifest": { "version": 1, "sources": sources }, "dryRun": dry_run })
}
