//! Adds: `knowledge_source.add` per second over HTTP from 8 clients into one
//! Agent, at the start and at the end of an import of N sources (the first and
//! the last tenth of the adds), so a fall as the Agent grows shows.
//!
//! The API and the workers are real processes started from `--bins`, a
//! comma-separated list of folders holding `svc-api` and `svc-worker` (default:
//! this binary's own folder), so an older build (e.g. main's) runs beside this
//! one in the same session: rounds go build by build, interleaved. Each run
//! starts from an empty database (migrated by that build) and runs once
//! without any manual ANALYZE (the service alone: a build that keeps its own
//! statistics does so) and once with `ANALYZE` of the knowledge tables by hand
//! after each tenth, as fresh autovacuum statistics would be.
//!
//! Beside the rates it prints what each add and each promotion cost in CPU
//! time, PostgreSQL's (the sessions the API or the workers opened) and the
//! process's own (`cpu`): a figure that moves much less with the rest of the
//! machine than a rate does, for comparing builds. PostgreSQL's part is NaN
//! when PostgreSQL runs on another host (its sessions cannot be read here).
//!
//! For the first and the last tenth it also prints the WAL written per add
//! (and its full-page images) and what the API's and the workers' PostgreSQL
//! sessions were doing, sampled (`waits`): on the CPU, idle in a transaction
//! (waiting for their process), or waiting on a lock or a WAL flush. A tenth
//! that runs slower with no more CPU per add shows there what it waited on.
//! And, for every tenth, its adds per second (whether the rate falls as the
//! Agent grows, beyond the first and last tenths' noise) and the checkpoints
//! that began in it: the tenths after one write whole pages again.
//!
//! With `SVC_BENCH_SLOW_PLANS_MS=N` PostgreSQL logs the plan of every
//! statement slower than N ms (`auto_explain`, in the server's log): how the
//! statements that slow down as the Agent grows were found.
//!
//! `cargo build --release --workspace --bins &&
//!  target/release/svc-bench adds [--sources 20000] [--size 400] [--clients 8]
//!    [--workers 1] [--rounds 1] [--bins DIR,DIR] [--idempotency-keys] [--corpus PATH]`

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use svc_tests::http::HttpClient;
use svc_tests::process::Spawned;
use svc_tests::{AUDIENCE, ISSUER, TestIssuer};

use crate::common::Scratch;
use crate::waits::{Sampler, Samples};
use crate::{corpus, cpu};

/// `svc-bench adds`.
#[derive(clap::Args)]
pub struct Options {
    /// Sources the Agent grows to (at least 10: the import is measured by tenths).
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    sources: usize,
    /// Size of each source, about (bytes).
    #[arg(long, default_value_t = 400, value_name = "N")]
    size: usize,
    /// Concurrent clients adding.
    #[arg(long, default_value_t = 8, value_name = "N")]
    clients: usize,
    /// Real svc-worker processes processing as the adds arrive (0: the add path alone).
    #[arg(long, default_value_t = 1, value_name = "N")]
    workers: usize,
    /// Rounds; each runs every build in turn, and the table has the medians.
    #[arg(long, default_value_t = 1, value_name = "N")]
    rounds: usize,
    /// Folders holding the svc-api and svc-worker of each build to measure
    /// (comma-separated); the default is svc-bench's own folder.
    #[arg(long, value_delimiter = ',', default_values_os_t = [own_folder()], value_name = "DIR,DIR")]
    bins: Vec<PathBuf>,
    /// Each add with an idempotency key, so it runs in a transaction with its
    /// record instead of as its one statement alone.
    #[arg(long)]
    idempotency_keys: bool,
    /// The corpus.jsonl the sources' text is drawn from.
    #[arg(long, default_value_os_t = corpus::default_path(), value_name = "PATH")]
    corpus: PathBuf,
}

/// The folder of this program, where its build's `svc-api` and `svc-worker` are.
fn own_folder() -> PathBuf {
    std::env::current_exe().ok().and_then(|exe| exe.parent().map(PathBuf::from)).unwrap_or_default()
}

/// Adds per second over the first and the last tenth of the adds, and overall.
#[derive(Clone, Copy)]
struct Rates {
    first: f64,
    last: f64,
    overall: f64,
    /// Sources active when the last add returned, per second since the first.
    processed: f64,
    /// CPU milliseconds per add: PostgreSQL's (the API's sessions) and the API's.
    add_ms: (f64, f64),
    /// CPU milliseconds per promotion meanwhile: PostgreSQL's (the workers'
    /// sessions) and the workers'.
    promotion_ms: (f64, f64),
    /// CPU milliseconds per add (PostgreSQL's and the API's together) over
    /// the first and the last tenth: what an add itself costs as the Agent
    /// grows, apart from what else shares the machine meanwhile.
    add_ms_tenths: (f64, f64),
    /// Cores the workers and their sessions kept busy over the first and the
    /// last tenth: the share of the machine processing took from the adds.
    worker_cores_tenths: (f64, f64),
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(options.sources >= 10, "--sources must be at least 10");
    let abstracts = corpus::read(&options.corpus)?;
    let documents: Arc<Vec<String>> =
        Arc::new((0..options.sources).map(|i| corpus::document(&abstracts, i as u64, options.size)).collect());
    let mean = documents.iter().map(String::len).sum::<usize>() / documents.len();
    println!(
        "svc-bench adds: {} sources of ~{mean} bytes into one Agent, {} clients, {} worker(s), {} cores",
        options.sources,
        options.clients,
        options.workers,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut results: Vec<(String, &str, Vec<Rates>)> = Vec::new();
    for round in 0..options.rounds {
        for bins in &options.bins {
            for analyze in [false, true] {
                let rates = import(&options, bins, analyze, documents.clone()).await?;
                let label = bins.display().to_string();
                let mode = if analyze { "by hand after each tenth" } else { "none by hand" };
                eprintln!(
                    "round {round}, {label}, ANALYZE {mode}: {:.0} → {:.0} adds/s ({:.0} overall), {:.0} processed/s; \
                     CPU ms per add {:.2} + {:.2} ({:.2} → {:.2} from the first tenth to the last), \
                     per promotion {:.2} + {:.2} (PostgreSQL + process); workers' cores {:.2} → {:.2}",
                    rates.first,
                    rates.last,
                    rates.overall,
                    rates.processed,
                    rates.add_ms.0,
                    rates.add_ms.1,
                    rates.add_ms_tenths.0,
                    rates.add_ms_tenths.1,
                    rates.promotion_ms.0,
                    rates.promotion_ms.1,
                    rates.worker_cores_tenths.0,
                    rates.worker_cores_tenths.1
                );
                match results.iter_mut().find(|(l, m, _)| *l == label && *m == mode) {
                    Some((_, _, all)) => all.push(rates),
                    None => results.push((label, mode, vec![rates])),
                }
            }
        }
    }
    println!(
        "\n| build | ANALYZE | adds/s, first 10% | adds/s, last 10% | adds/s, all | processed/s meanwhile \
         | CPU ms per add (PostgreSQL + API) | CPU ms per add, first → last 10% | CPU ms per promotion (PostgreSQL + worker) \
         | workers' cores, first → last 10% |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (label, mode, all) in results {
        let median = |f: fn(&Rates) -> f64| {
            let mut v: Vec<f64> = all.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "| {label} | {mode} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} + {:.2} | {:.2} → {:.2} | {:.2} + {:.2} | {:.2} → {:.2} |",
            median(|r| r.first),
            median(|r| r.last),
            median(|r| r.overall),
            median(|r| r.processed),
            median(|r| r.add_ms.0),
            median(|r| r.add_ms.1),
            median(|r| r.add_ms_tenths.0),
            median(|r| r.add_ms_tenths.1),
            median(|r| r.promotion_ms.0),
            median(|r| r.promotion_ms.1),
            median(|r| r.worker_cores_tenths.0),
            median(|r| r.worker_cores_tenths.1)
        );
    }
    Ok(())
}

/// One import into a new Agent with the build in `bins`.
async fn import(
    options: &Options,
    bins: &std::path::Path,
    analyze: bool,
    documents: Arc<Vec<String>>,
) -> anyhow::Result<Rates> {
    let scratch = Scratch::create("adds").await?;
    let pool = svc_core::runtime::connect_unbounded(&scratch.url, 2)?;
    if let Ok(ms) = std::env::var("SVC_BENCH_SLOW_PLANS_MS") {
        let ms: u64 = ms.parse().context("SVC_BENCH_SLOW_PLANS_MS")?;
        let database: String = sqlx::query_scalar("SELECT current_database()").fetch_one(&pool).await?;
        for setting in [
            "session_preload_libraries = 'auto_explain'".to_owned(),
            format!("auto_explain.log_min_duration = '{ms}ms'"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {database} SET {setting}"))).execute(&pool).await?;
        }
    }
    let api_binary = bins.join("svc-api");
    let migrated = tokio::process::Command::new(&api_binary)
        .arg("migrate")
        .env("DATABASE_URL", &scratch.url)
        .output()
        .await
        .with_context(|| format!("run {}", api_binary.display()))?;
    anyhow::ensure!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let namespace = format!("svcbench_adds_{}", std::process::id());
    let jwks = TestIssuer::shared().jwks_path().to_str().context("a UTF-8 path")?.to_owned();
    let mut api = Spawned::start_at(
        &api_binary,
        &["serve"],
        &[
            ("DATABASE_URL", scratch.url.as_str()),
            ("SVC_BIND", "127.0.0.1:0"),
            ("SVC_LOG_FORMAT", "json"),
            ("RUST_LOG", "warn,svc_api=info"),
            ("SVC_OIDC_ISSUER", ISSUER),
            ("SVC_OIDC_AUDIENCE", AUDIENCE),
            ("SVC_OIDC_JWKS_FILE", jwks.as_str()),
            ("SVC_QUEUE_NAMESPACE", namespace.as_str()),
        ],
    );
    let line = api.wait_for("svc-api listening").await;
    let log: Value = serde_json::from_str(&line)?;
    let addr = log["fields"]["addr"].as_str().context("the bound address")?;
    let client = HttpClient::new(format!("http://{addr}"));
    svc_core::admin::user_setup(&pool, ISSUER, "adds", "bench@example.test", None).await?;
    let token = TestIssuer::shared().token("adds");
    let created = client
        .post_json("/api/public/operations/workspaces/create", Some(&token), None, &json!({ "name": "adds" }))
        .await;
    anyhow::ensure!(created.status == 200, "{}", created.text());
    let workspace = created.json()["data"]["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
    let limits = [format!("knowledge_sources={}", options.sources + 10), "knowledge_bytes=100000000000".to_owned()];
    svc_core::admin::plan_set(&pool, &workspace, "pro", &limits).await?;
    let agent = client
        .post_json("/api/public/operations/agents/create", Some(&token), Some(&workspace), &json!({ "name": "adds" }))
        .await;
    let agent = agent.json()["data"]["agent"]["id"].as_str().context("an Agent")?.to_owned();
    let mut workers = Vec::new();
    for _ in 0..options.workers {
        let mut worker = Spawned::start_at(
            &bins.join("svc-worker"),
            &[],
            &[
                ("DATABASE_URL", scratch.url.as_str()),
                ("SVC_QUEUE_NAMESPACE", namespace.as_str()),
                ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
                ("RUST_LOG", "warn,svc_worker=info"),
            ],
        );
        worker.wait_for("svc-worker started").await;
        workers.push(worker);
    }

    // CPU time from the first add to the last: the processes' own and their
    // sessions' (opened lazily, so a session opened meanwhile counts whole).
    let database: String = sqlx::query_scalar("SELECT current_database()").fetch_one(&pool).await?;
    let api_pid = api.pid().context("the API runs")?;
    let worker_pids: Vec<u32> = workers.iter().filter_map(Spawned::pid).collect();
    let metered = async |pool: &sqlx::PgPool| -> anyhow::Result<[cpu::Reading; 4]> {
        Ok([
            cpu::Reading::of_sessions(cpu::sessions(pool, &database, "svc-api").await?),
            cpu::Reading::of([api_pid]),
            cpu::Reading::of_sessions(cpu::sessions(pool, &database, "svc-worker").await?),
            cpu::Reading::of(worker_pids.iter().copied()),
        ])
    };
    let before = metered(&pool).await?;
    // What the API's and the workers' sessions waited on, and the WAL written,
    // in each tenth: where a tenth's rate falls while its CPU per add does not.
    let sampled = svc_core::runtime::connect_unbounded(&scratch.url, 2)?;
    let samplers = [
        Sampler::start(sampled.clone(), database.clone(), "svc-api"),
        Sampler::start(sampled.clone(), database.clone(), "svc-worker"),
    ];
    // The server's WAL so far: bytes, full-page images (a page's first change
    // after a checkpoint writes the whole page; sessions report them at most
    // once a second, so a tenth's count may lag) and checkpoints (-1 where
    // pg_stat_bgwriter no longer counts them, PostgreSQL 17 on).
    let wal = async |pool: &sqlx::PgPool| -> sqlx::Result<Wal> {
        let (bytes, images, checkpoints) = sqlx::query_as(
            "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, (SELECT wal_fpi FROM pg_stat_wal),
                    (SELECT coalesce((to_jsonb(b) ->> 'checkpoints_timed')::bigint
                                     + (to_jsonb(b) ->> 'checkpoints_req')::bigint, -1)
                     FROM pg_stat_bgwriter b)",
        )
        .fetch_one(pool)
        .await?;
        Ok(Wal { bytes, images, checkpoints })
    };
    let mut looks: Vec<(Samples, Samples, Wal)> = Vec::new();

    let next = Arc::new(AtomicUsize::new(0));
    let tenth = documents.len().div_ceil(10);
    // Each tenth: its adds, its seconds and the CPU seconds the API and the
    // workers (each with its sessions) spent meanwhile (an ANALYZE between
    // tenths is not counted).
    let mut stages: Vec<(usize, Duration, f64, f64)> = Vec::new();
    let mut stage_end = 0;
    let began = Instant::now();
    while stage_end < documents.len() {
        let begin = stage_end;
        stage_end = (stage_end + tenth).min(documents.len());
        let end = stage_end;
        let spent_before = metered(&pool).await?;
        let wal_before = wal(&pool).await?;
        samplers.iter().for_each(|sampler| drop(sampler.take()));
        let started = Instant::now();
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..options.clients {
            let (client, token, workspace, agent, next, documents) =
                (client.clone(), token.clone(), workspace.clone(), agent.clone(), next.clone(), documents.clone());
            let keyed = options.idempotency_keys;
            clients.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        next.fetch_min(end, Ordering::Relaxed);
                        return anyhow::Ok(());
                    }
                    let content = &documents[i];
                    let mut input = json!({
                        "agentId": agent, "key": format!("doc-{i}"), "title": format!("Document {i}"),
                        "provenance": { "kind": "repository", "uri": format!("docs/{i}") },
                        "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()),
                        "content": content,
                    });
                    if keyed {
                        input["idempotencyKey"] = json!(format!("adds-bench-{i}"));
                    }
                    let added = client
                        .post_json(
                            "/api/public/operations/knowledge-sources/add",
                            Some(&token),
                            Some(&workspace),
                            &input,
                        )
                        .await;
                    anyhow::ensure!(added.status == 200, "add {i}: {}", added.text());
                }
            });
        }
        for finished in clients.join_all().await {
            finished?;
        }
        let took = started.elapsed();
        looks.push((samplers[0].take(), samplers[1].take(), wal(&pool).await?.since(&wal_before)));
        let spent_after = metered(&pool).await?;
        let spent = |i: usize| spent_after[i].since(&spent_before[i]);
        stages.push((end - begin, took, spent(0) + spent(1), spent(2) + spent(3)));
        if analyze {
            for table in svc_core::knowledge::statistics::ANALYZED_TABLES {
                sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {table}"))).execute(&pool).await?;
            }
        }
    }
    let after = metered(&pool).await?;
    drop(samplers);
    sampled.close().await;
    for (name, tenth) in [("first", 0), ("last", stages.len() - 1)] {
        let ((api, worker, wal), adds) = (&looks[tenth], stages[tenth].0);
        let adds = adds.max(1) as f64;
        eprintln!(
            "  {name} tenth: {:.1} kB WAL per add ({:.2} full-page images); API sessions busy {:.2} ({}); \
             worker sessions busy {:.2} ({})",
            wal.bytes as f64 / 1024.0 / adds,
            wal.images as f64 / adds,
            api.busy_sessions(),
            api.busiest(5),
            worker.busy_sessions(),
            worker.busiest(4)
        );
    }
    let checkpoints: Vec<String> = looks.iter().map(|(.., wal)| wal.checkpoints.to_string()).collect();
    eprintln!("  checkpoints in each tenth: {}", checkpoints.join(" "));
    let rate = |(adds, took): (usize, Duration)| adds as f64 / took.as_secs_f64().max(1e-9);
    let tenths: Vec<String> = stages.iter().map(|(adds, took, ..)| format!("{:.0}", rate((*adds, *took)))).collect();
    eprintln!("  adds/s in each tenth: {}", tenths.join(" "));
    let all = stages.iter().fold((0, Duration::ZERO), |(n, t), (adds, took, ..)| (n + adds, t + *took));
    let active: i64 =
        sqlx::query_scalar("SELECT count(*) FROM knowledge_revisions WHERE state = 'active'").fetch_one(&pool).await?;
    let spent: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a.since(b)).collect();
    let per = |seconds: f64, n: usize| 1000.0 * seconds / n.max(1) as f64;
    let promoted = usize::try_from(active)?;
    let (first, last) = (stages[0], stages[stages.len() - 1]);
    let rates = Rates {
        first: rate((first.0, first.1)),
        last: rate((last.0, last.1)),
        overall: rate(all),
        processed: rate((promoted, began.elapsed())),
        add_ms: (per(spent[0], all.0), per(spent[1], all.0)),
        promotion_ms: (per(spent[2], promoted), per(spent[3], promoted)),
        add_ms_tenths: (per(first.2, first.0), per(last.2, last.0)),
        worker_cores_tenths: (first.3 / first.1.as_secs_f64(), last.3 / last.1.as_secs_f64()),
    };

    for mut worker in workers {
        worker.terminate().await;
    }
    api.terminate().await;
    pool.close().await;
    scratch.drop().await?;
    svc_tests::stack::flush_namespace("redis://127.0.0.1:6379", &namespace).await;
    Ok(rates)
}

/// The server's WAL counters (read in `import`), or what changed between two readings.
#[derive(Clone, Copy)]
struct Wal {
    bytes: i64,
    images: i64,
    checkpoints: i64,
}

impl Wal {
    /// Checkpoints stay -1 (not counted) if either reading lacks them.
    fn since(&self, before: &Wal) -> Wal {
        let uncounted = self.checkpoints < 0 || before.checkpoints < 0;
        Wal {
            bytes: self.bytes - before.bytes,
            images: self.images - before.images,
            checkpoints: if uncounted { -1 } else { self.checkpoints - before.checkpoints },
        }
    }
}
