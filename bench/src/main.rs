//! `svc-bench`: the benchmarks behind the README's performance figures. Each
//! creates its own database on the server `DATABASE_URL` points at (default
//! `postgres://postgres@127.0.0.1/postgres`), measures the real code beside a
//! practical limit in the same run, prints a table, and drops the database.
//!
//! - `requests`: operations over HTTP beside a bare handler (the default).
//! - `ingest`: 100 sources of 750,000 bytes through the API and 1 or 2 real
//!   `svc-worker` processes, beside the same passages COPY'd into PostgreSQL.
//!   Needs the release binaries: `cargo build --release --workspace --bins`.
//! - `reconcile`: a 100 x 750,000-byte manifest applied with 1 and 2 workers,
//!   and planned against an Agent that already has it.
//! - `adds`: `knowledge_source.add` per second from 8 clients into one Agent,
//!   at the start and the end of an import, with and without manual ANALYZE,
//!   for one or several builds side by side.
//! - `answers`: the answer engine's ranking quality (nDCG@5 beside BM25) and
//!   speed (answers/s, p99, retrieval time) with the same stack.
//! - `fairness`: one Workspace's small source beside another's backlog, with
//!   1 and 2 workers, and the cost of a look at the turn order.

mod adds;
mod answers;
mod common;
mod corpus;
mod cpu;
mod fairness;
mod ingest;
mod reconcile;
mod requests;
mod waits;

/// The same allocator as `svc-api`, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let command = if args.first().is_some_and(|a| !a.starts_with("--")) { args.remove(0) } else { "requests".into() };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match command.as_str() {
            "requests" => requests::run(args).await,
            "ingest" => ingest::run(args).await,
            "adds" => adds::run(args).await,
            "answers" => answers::run(args).await,
            "reconcile" => reconcile::run(args).await,
            "fairness" => fairness::run(args).await,
            other => anyhow::bail!("unknown benchmark {other}: requests, ingest, adds, reconcile, answers or fairness"),
        }
    })
}
