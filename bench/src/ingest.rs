//! Ingest: sources of 750,000 bytes from the first add to all active, through
//! the real API (in-process) and 1 or 2 real `svc-worker` processes, beside the
//! practical limit measured in the same run: the same passages written straight
//! into PostgreSQL with COPY, into a table with the same tsvector and a GIN
//! index on it (the pipeline itself writes postings, not a GIN index).
//!
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p svc-bench -- ingest [--sources 100] [--bytes 750000] [--workers 1,2] [--corpus PATH]`

use std::path::PathBuf;
use std::time::Instant;

use crate::common::{Scratch, Stack};
use crate::corpus;

/// `svc-bench ingest`.
#[derive(clap::Args)]
pub struct Options {
    /// Documents to add.
    #[arg(long, default_value_t = 100, value_name = "N")]
    sources: usize,
    /// Size of each document, at most (bytes).
    #[arg(long, default_value_t = 750_000, value_name = "N")]
    bytes: usize,
    /// Real svc-worker processes, one run per number (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_name = "N,N")]
    workers: Vec<usize>,
    /// The corpus.jsonl the documents' text is drawn from.
    #[arg(long, default_value_os_t = corpus::default_path(), value_name = "PATH")]
    corpus: PathBuf,
    /// Adds in flight at once.
    #[arg(long, default_value_t = 4, value_name = "N")]
    senders: usize,
}

pub struct Document {
    pub key: String,
    pub title: String,
    pub content: String,
}

/// `count` documents of at most `bytes` bytes from the corpus at `path`.
pub fn documents(path: &std::path::Path, count: usize, bytes: usize) -> anyhow::Result<Vec<Document>> {
    let abstracts = corpus::read(path)?;
    Ok((0..count)
        .map(|i| Document {
            key: format!("doc-{i}"),
            title: format!("Document {i}"),
            content: corpus::document(&abstracts, i as u64, bytes),
        })
        .collect())
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let documents = documents(&options.corpus, options.sources, options.bytes)?;
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
/// is stored, into a table with a GIN index on it.
/// Returns the seconds and the passages.
pub async fn copy_limit(documents: &[Document]) -> anyhow::Result<(f64, usize)> {
    let scratch = Scratch::create("copy").await?;
    // One statement, which on a slow machine runs past the request path's
    // statement timeout.
    let pool = svc_core::runtime::connect_unbounded(&scratch.url, 2)?;
    svc_core::runtime::MIGRATOR.run(&pool).await?;
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
        for passage in svc_search::split(&document.content) {
            let heading = passage.heading.as_deref().map_or("\\N".to_owned(), escape);
            payload.push_str(&format!("{agent}\t{}\t{heading}\t{}\n", escape(&document.title), escape(&passage.body)));
            rows += 1;
        }
    }
    let mut conn = svc_core::runtime::connection(&pool).await?;
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
    let stack = Stack::start(&format!("ingest{workers}"), workers).await?;
    let started = Instant::now();
    let sources = documents.iter().map(|d| (d.key.clone(), d.title.clone(), d.content.clone())).collect();
    stack.add_all(sources, senders).await?;
    let accepted = started.elapsed();
    stack.wait_active(documents.len() as i64).await?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{workers} worker(s): adds accepted in {:.1} s, all active in {secs:.1} s", accepted.as_secs_f64());
    stack.stop().await?;
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use crate::{Benchmark, parse};

    #[test]
    fn workers_are_a_comma_separated_list() {
        let Ok(Benchmark::Ingest(options)) = parse(&["ingest"]) else { panic!("ingest") };
        assert_eq!((options.workers, options.sources, options.bytes, options.senders), (vec![1, 2], 100, 750_000, 4));
        assert!(options.corpus.ends_with("shared/data/retrieval/dbpedia/corpus.jsonl"));
        let Ok(Benchmark::Ingest(options)) = parse(&["ingest", "--workers", "2,4,8"]) else { panic!("ingest") };
        assert_eq!(options.workers, [2, 4, 8]);
        assert!(parse(&["ingest", "--workers", "1,x"]).is_err());
    }
}
