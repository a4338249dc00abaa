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
//! - `answers`: the answer engine's ranking quality (nDCG@5 beside BM25, on
//!   one or more labelled sets) and speed (answers/s, p99, retrieval time)
//!   with the same stack.
//! - `fairness`: one Workspace's small source beside another's backlog, with
//!   1 and 2 workers, and the cost of a look at the turn order.
//!
//! `svc-bench --help` and `svc-bench BENCHMARK --help` list every option with
//! its default.

use clap::{Parser, Subcommand};

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

#[derive(Parser)]
#[command(
    name = "svc-bench",
    version,
    about = "svc's benchmarks: each measures the real code beside a practical limit in the same run and prints a table.",
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "With no benchmark named, `requests` runs (its options may follow `svc-bench` directly).\n\n\
        Environment:\n  \
        DATABASE_URL             a PostgreSQL server where the run may create (and drop) databases\n                           \
        [default: postgres://postgres@127.0.0.1/postgres]\n  \
        SVC_BENCH_KEEP=1         keep the run's database, to look at plans on its data\n  \
        SVC_BENCH_SLOW_PLANS_MS  (adds) log the plan of every statement slower than this many ms\n\n\
        Redis must answer at redis://127.0.0.1:6379. The benchmarks that start svc-worker (and adds, svc-api) \
        take them from svc-bench's own folder: build with `cargo build --release --workspace --bins`."
)]
struct Cli {
    #[command(subcommand)]
    benchmark: Option<Benchmark>,
    /// `requests`, when no benchmark is named.
    #[command(flatten, next_help_heading = "Options of `requests`, the default")]
    requests: requests::Options,
}

#[derive(Subcommand)]
enum Benchmark {
    /// Operations over HTTP and MCP beside a bare handler on the same pool (the default).
    Requests(requests::Options),
    /// Large sources through the API and real workers, from first add to all active, beside a COPY.
    Ingest(ingest::Options),
    /// knowledge_source.add per second into one growing Agent, with real svc-api and svc-worker processes.
    Adds(adds::Options),
    /// A 100 x 750,000-byte manifest applied with real workers beside a COPY, then planned again.
    Reconcile(reconcile::Options),
    /// The answer engine: nDCG@5 of its sources beside BM25 on labelled sets, and its speed.
    Answers(answers::Options),
    /// One Workspace's small source beside another's backlog, and the cost of a look at the turn order.
    Fairness(fairness::Options),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match cli.benchmark.unwrap_or(Benchmark::Requests(cli.requests)) {
            Benchmark::Requests(options) => requests::run(options).await,
            Benchmark::Ingest(options) => ingest::run(options).await,
            Benchmark::Adds(options) => adds::run(options).await,
            Benchmark::Answers(options) => answers::run(options).await,
            Benchmark::Reconcile(options) => reconcile::run(options).await,
            Benchmark::Fairness(options) => fairness::run(options).await,
        }
    })
}

/// What `svc-bench ARGS...` would run.
#[cfg(test)]
fn parse(args: &[&str]) -> Result<Benchmark, clap::Error> {
    let cli = Cli::try_parse_from(std::iter::once("svc-bench").chain(args.iter().copied()))?;
    Ok(cli.benchmark.unwrap_or(Benchmark::Requests(cli.requests)))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_is_an_answer_not_an_error() {
        for args in [&["--help"][..], &["adds", "--help"], &["answers", "--help"], &["help", "fairness"]] {
            let error = parse(args).err().expect("help stops the parse");
            assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
            assert_eq!(error.exit_code(), 0, "{args:?}");
        }
    }

    #[test]
    fn a_wrong_option_is_a_usage_error() {
        for args in [&["adds", "--sources"][..], &["adds", "--bogus", "1"], &["--seconds", "1", "adds"]] {
            let error = parse(args).err().expect("refused");
            assert_eq!(error.exit_code(), 2, "{args:?}: {error}");
        }
    }
}
