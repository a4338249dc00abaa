//! Ingest: sources of 750,000 bytes from the first add to all active, through
//! the real API (in-process) and 1 or 2 real `svc-worker` processes, beside the
//! practical limit measured in the same run: the same passages written straight
//! into PostgreSQL with COPY, into a table with the same tsvector and GIN index.
//!
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p svc-bench -- ingest [--sources 100] [--bytes 750000] [--workers 1,2] [--corpus PATH]`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use svc_core::knowledge::passages;
use svc_tests::http::HttpClient;
use svc_tests::process::Spawned;
use svc_tests::{ISSUER, TestIssuer};

use crate::common::{self, Scratch};
use crate::corpus;

struct Options {
    sources: usize,
    bytes: usize,
    workers: Vec<usize>,
    corpus: PathBuf,
    /// Adds in flight at once.
    senders: usize,
}

fn options(args: Vec<String>) -> anyhow::Result<Options> {
    let mut options =
        Options { sources: 100, bytes: 750_000, workers: vec![1, 2], corpus: corpus::default_path(), senders: 4 };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = args.next().context("every option takes a value")?;
        match arg.as_str() {
            "--sources" => options.sources = value.parse()?,
            "--bytes" => options.bytes = value.parse()?,
            "--workers" => options.workers = value.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--corpus" => options.corpus = value.into(),
            "--senders" => options.senders = value.parse()?,
            other => anyhow::bail!("unknown option {other}"),
        }
    }
    Ok(options)
}

struct Document {
    key: String,
    title: String,
    content: String,
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let options = options(args)?;
    let abstracts = corpus::read(&options.corpus)?;
    let documents: Vec<Document> = (0..options.sources)
        .map(|i| Document {
            key: format!("doc-{i}"),
            title: format!("Document {i}"),
            content: corpus::document(&abstracts, i as u64, options.bytes),
        })
        .collect();
    let total: usize = documents.iter().map(|d| d.content.len()).sum();
    let mb = total as f64 / 1e6;
    println!(
        "svc-bench ingest: {} sources, {:.1} MB of text, {} cores",
        documents.len(),
        mb,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (limit_secs, passages) = copy_limit(&documents).await?;
    println!("\n| run | seconds | MB/s | sources/s | of limit |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let row = |name: &str, secs: f64| {
        println!(
            "| {name} | {secs:.1} | {:.2} | {:.2} | {:.0}% |",
            mb / secs,
            documents.len() as f64 / secs,
            100.0 * limit_secs / secs
        )
    };
    row(&format!("COPY of the same {passages} passages (limit)"), limit_secs);
    for workers in &options.workers {
        let secs = pipeline(&documents, *workers, options.senders).await?;
        row(&format!("API + {workers} worker{}", if *workers == 1 { "" } else { "s" }), secs);
    }
    Ok(())
}

/// COPY of every passage, with its tsvector computed by PostgreSQL as the row
/// is stored, into a table with the same GIN index as `knowledge_passages`.
async fn copy_limit(documents: &[Document]) -> anyhow::Result<(f64, usize)> {
    let scratch = Scratch::create("copy").await?;
    let pool = common::migrated(&scratch.url, 2).await?;
    sqlx::query(
        "CREATE TABLE bench_passages (
             agent_id uuid NOT NULL, title text NOT NULL, heading text, body text NOT NULL,
             search tsvector GENERATED ALWAYS AS
                 (to_tsvector('english', title || E'\\n' || coalesce(heading || E'\\n', '') || body)) STORED)",
    )
    .execute(&pool)
    .await?;
    sqlx::query("CREATE INDEX ON bench_passages USING gin (agent_id, search)").execute(&pool).await?;
    let agent = uuid::Uuid::now_v7();
    let mut payload = String::new();
    let mut rows = 0;
    for document in documents {
        for passage in passages::split(&document.content) {
            let heading = passage.heading.as_deref().map_or("\\N".to_owned(), escape);
            payload.push_str(&format!("{agent}\t{}\t{heading}\t{}\n", escape(&document.title), escape(&passage.body)));
            rows += 1;
        }
    }
    let mut conn = pool.acquire().await?;
    let started = Instant::now();
    let mut copy = conn.copy_in_raw("COPY bench_passages (agent_id, title, heading, body) FROM STDIN").await?;
    for chunk in payload.as_bytes().chunks(1 << 20) {
        copy.send(chunk).await?;
    }
    copy.finish().await?;
    let secs = started.elapsed().as_secs_f64();
    drop(conn);
    pool.close().await;
    scratch.drop().await?;
    Ok((secs, rows))
}

/// COPY's text format: backslash, tab, newline and carriage return escaped.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n").replace('\r', "\\r")
}

/// Seconds from the first add to every source active.
async fn pipeline(documents: &[Document], workers: usize, senders: usize) -> anyhow::Result<f64> {
    let scratch = Scratch::create(&format!("ingest{workers}")).await?;
    let pool = common::migrated(&scratch.url, 16).await?;
    let namespace = format!("svcbench_{}_{workers}", std::process::id());
    let config = common::config(&scratch.url, &namespace);
    let state = svc_api::AppState::new(pool.clone(), &config)?;
    let addr = common::serve(svc_api::router(state, &config, tokio_util::sync::CancellationToken::new())).await?;
    let client = HttpClient::new(format!("http://{addr}"));
    svc_core::admin::user_setup(&pool, ISSUER, "ingest", "ingest@example.test", None).await?;
    let token = TestIssuer::shared().token("ingest");
    let created = client
        .post_json("/api/public/operations/workspaces/create", Some(&token), None, &json!({ "name": "Ingest" }))
        .await;
    anyhow::ensure!(created.status == 200, "{}", created.text());
    let workspace = created.json()["data"]["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
    svc_core::admin::plan_set(&pool, &workspace, "pro", &[]).await?;
    let agent = client
        .post_json("/api/public/operations/agents/create", Some(&token), Some(&workspace), &json!({ "name": "Ingest" }))
        .await;
    let agent = agent.json()["data"]["agent"]["id"].as_str().context("an Agent")?.to_owned();

    let worker_binary = std::env::current_exe()?.with_file_name("svc-worker");
    anyhow::ensure!(
        worker_binary.exists(),
        "build the release binaries first: cargo build --release --workspace --bins"
    );
    let mut processes = Vec::new();
    for _ in 0..workers {
        let mut process = Spawned::start_at(
            &worker_binary,
            &[],
            &[
                ("DATABASE_URL", scratch.url.as_str()),
                ("SVC_QUEUE_NAMESPACE", namespace.as_str()),
                ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
                ("RUST_LOG", "info"),
            ],
        );
        process.wait_for("svc-worker started").await;
        processes.push(process);
    }

    let started = Instant::now();
    let mut sends = tokio::task::JoinSet::new();
    for chunk in documents.chunks(documents.len().div_ceil(senders.max(1))) {
        let inputs: Vec<serde_json::Value> = chunk
            .iter()
            .map(|d| {
                json!({
                    "agentId": agent, "key": d.key, "title": d.title,
                    "provenance": { "kind": "repository", "uri": format!("docs/{}.md", d.key) },
                    "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(d.content.as_bytes()),
                    "content": d.content,
                })
            })
            .collect();
        let (client, token, workspace) = (client.clone(), token.clone(), workspace.clone());
        sends.spawn(async move {
            for input in inputs {
                let added = client
                    .post_json("/api/public/operations/knowledge-sources/add", Some(&token), Some(&workspace), &input)
                    .await;
                anyhow::ensure!(added.status == 200, "{}", added.text());
            }
            anyhow::Ok(())
        });
    }
    for sent in sends.join_all().await {
        sent?;
    }
    let accepted = started.elapsed();
    let wanted = documents.len() as i64;
    loop {
        let active: i64 = sqlx::query_scalar("SELECT count(*) FROM knowledge_revisions WHERE state = 'active'")
            .fetch_one(&pool)
            .await?;
        let failed: i64 = sqlx::query_scalar("SELECT count(*) FROM knowledge_revisions WHERE state = 'failed'")
            .fetch_one(&pool)
            .await?;
        anyhow::ensure!(failed == 0, "{failed} revisions failed");
        if active == wanted {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(1800), "not done in 30 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{workers} worker(s): adds accepted in {:.1} s, all active in {secs:.1} s", accepted.as_secs_f64());
    for mut process in processes {
        process.terminate().await;
    }
    pool.close().await;
    scratch.drop().await?;
    svc_tests::stack::flush_namespace("redis://127.0.0.1:6379", &namespace).await;
    Ok(secs)
}
