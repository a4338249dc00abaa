//! Answers: quality and speed of the answer engine.
//!
//! - Quality: nDCG@5 of an answer's `sources` on the public labelled set in
//!   `../shared/data/retrieval/dbpedia` (each document one Knowledge Source,
//!   ingested through the real API and workers), beside BM25 (the `bm25s`
//!   Python library: English stemmer and stop words) on the same documents and
//!   questions in the same run (`bench/bm25_baseline.py`).
//! - Speed: answers/s and latency of the extractive engine for an Agent holding
//!   `--sources` sources of about `--size` bytes each (by default 100 of
//!   750,000; 100,000 of 400 is a help centre of FAQ entries), added through
//!   the real API and workers, with the retrieval time per question apart:
//!   first with no table statistics at all (autovacuum is off here, and a
//!   bulk import into a new Agent runs ahead of it anywhere), then after
//!   `ANALYZE`.
//!
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p svc-bench -- answers [--only quality|speed] [--dataset DIR] [--concurrency 8]
//!  [--sources 100] [--size 750000]`

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use svc_contract::resources::Language;
use svc_core::answers::{self, Speaker};
use svc_core::ids::AgentId;

use crate::common::Stack;
use crate::corpus;

struct Options {
    only: Option<String>,
    dataset: PathBuf,
    concurrency: usize,
    questions: usize,
    sources: usize,
    size: usize,
}

fn options(args: Vec<String>) -> anyhow::Result<Options> {
    let dataset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/retrieval/dbpedia");
    let mut options = Options { only: None, dataset, concurrency: 8, questions: 200, sources: 100, size: 750_000 };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = args.next().context("every option takes a value")?;
        match arg.as_str() {
            "--only" => options.only = Some(value),
            "--dataset" => options.dataset = value.into(),
            "--concurrency" => options.concurrency = value.parse()?,
            "--questions" => options.questions = value.parse()?,
            "--sources" => options.sources = value.parse()?,
            "--size" => options.size = value.parse()?,
            other => anyhow::bail!("unknown option {other}"),
        }
    }
    Ok(options)
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let options = options(args)?;
    if options.only.as_deref() != Some("speed") {
        quality(&options.dataset).await?;
    }
    if options.only.as_deref() != Some("quality") {
        speed(&options).await?;
    }
    Ok(())
}

fn lines(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| Ok(serde_json::from_str(l)?)).collect()
}

/// Standard nDCG@5: linear gains, the ideal ranking from the judgments.
fn ndcg5(ranked: &[String], grades: &HashMap<String, u32>) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(5)
        .enumerate()
        .map(|(i, d)| f64::from(*grades.get(d).unwrap_or(&0)) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<u32> = grades.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(5).enumerate().map(|(i, g)| f64::from(*g) / (i as f64 + 2.0).log2()).sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

fn speaker(agent: &str) -> anyhow::Result<Speaker> {
    Ok(Speaker {
        id: AgentId::parse(agent).context("an Agent id")?,
        language: Language::En,
        instructions: None,
        temperature: 0.2,
        top_p: None,
    })
}

async fn quality(dataset: &Path) -> anyhow::Result<()> {
    let documents = lines(&dataset.join("corpus.jsonl"))?;
    let queries = lines(&dataset.join("queries.jsonl"))?;
    let mut judged: HashMap<String, HashMap<String, u32>> = HashMap::new();
    let qrels = std::fs::read_to_string(dataset.join("qrels/test.tsv"))?;
    for line in qrels.lines().skip(1) {
        let mut fields = line.split('\t');
        if let (Some(q), Some(d), Some(g)) = (fields.next(), fields.next(), fields.next()) {
            judged.entry(q.to_owned()).or_default().insert(d.to_owned(), g.parse()?);
        }
    }
    println!("\nsvc-bench answers (quality): {} documents, {} questions", documents.len(), queries.len());
    let stack = Stack::start("answersq", 2).await?;
    let sources = documents
        .iter()
        .map(|d| {
            let title: String = d["title"].as_str().unwrap_or_default().chars().take(240).collect();
            let title = if title.trim().is_empty() { "Untitled".to_owned() } else { title };
            (d["_id"].as_str().unwrap_or_default().to_owned(), title, d["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let started = Instant::now();
    stack.add_all(sources, 8).await?;
    stack.wait_active(documents.len() as i64).await?;
    eprintln!("{} sources active in {:.1} s", documents.len(), started.elapsed().as_secs_f64());
    let keys: HashMap<String, String> =
        sqlx::query_as::<_, (uuid::Uuid, String)>("SELECT id, key FROM knowledge_sources")
            .fetch_all(&stack.pool)
            .await?
            .into_iter()
            .map(|(id, key)| (svc_core::ids::SourceId(id).to_string(), key))
            .collect();
    let speaker = speaker(&stack.agent)?;
    let mut total = 0.0;
    for query in &queries {
        let answer = answers::answer(&stack.pool, None, &speaker, query["text"].as_str().unwrap_or_default()).await?;
        let ranked: Vec<String> = answer.sources.iter().filter_map(|s| keys.get(&s.id.to_string()).cloned()).collect();
        total += ndcg5(&ranked, judged.get(query["_id"].as_str().unwrap_or_default()).unwrap_or(&HashMap::new()));
    }
    let ours = total / queries.len() as f64;
    stack.stop().await?;
    let baseline = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bm25_baseline.py"))
        .arg(dataset)
        .output();
    let bm25 = match baseline {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        Ok(output) => format!(
            "not run ({}; pip install bm25s PyStemmer)",
            String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
        ),
        Err(error) => format!("not run ({error})"),
    };
    println!("\n| ranking | nDCG@5 |\n| --- | ---: |");
    println!("| svc answer engine (sources of each answer) | {ours:.4} |");
    println!("| BM25 (bm25s, English stemmer and stop words, title + text) | {bm25} |");
    Ok(())
}

/// `count` sources of about `size` bytes: documents assembled from the
/// abstracts when they are large, else one abstract each, cut to the size and,
/// past the number of abstracts, followed by the start of another so that no
/// two are the same.
fn sources(abstracts: &[corpus::Abstract], count: usize, size: usize) -> Vec<(String, String, String)> {
    if size >= 4_000 {
        return (0..count)
            .map(|i| (format!("doc-{i}"), format!("Document {i}"), corpus::document(abstracts, i as u64, size)))
            .collect();
    }
    let mut rng = corpus::Rng::new(11);
    (0..count)
        .map(|i| {
            let a = &abstracts[i % abstracts.len()];
            let round = i / abstracts.len();
            let mut text = a.text.clone();
            let title = if round == 0 { a.title.clone() } else { format!("{} ({round})", a.title) };
            if round > 0 || text.len() < size {
                text.push(' ');
                text.push_str(&abstracts[rng.below(abstracts.len())].text);
            }
            let mut cut = text.len().min(size);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let cut = text[..cut].rfind(' ').filter(|_| cut < text.len()).unwrap_or(cut);
            let title: String = title.chars().take(200).collect();
            (
                format!("doc-{i}"),
                if title.trim().is_empty() { "Untitled".into() } else { title },
                text[..cut].to_owned(),
            )
        })
        .collect()
}

async fn speed(options: &Options) -> anyhow::Result<()> {
    let (concurrency, count) = (options.concurrency, options.questions);
    let abstracts = corpus::read(&options.dataset.join("corpus.jsonl"))?;
    let documents = sources(&abstracts, options.sources, options.size);
    let bytes: usize = documents.iter().map(|d| d.2.len()).sum();
    println!(
        "\nsvc-bench answers (speed): an Agent with {} sources of about {} bytes, {:.1} MB",
        documents.len(),
        options.size,
        bytes as f64 / 1e6
    );
    let stack = Stack::start("answerss", 2).await?;
    let started = Instant::now();
    let total = documents.len() as i64;
    stack.add_all(documents, if options.size < 4_000 { 16 } else { 4 }).await?;
    stack.wait_active(total).await?;
    eprintln!("{total} sources active in {:.1} s", started.elapsed().as_secs_f64());
    let passages: i64 = sqlx::query_scalar("SELECT count(*) FROM knowledge_passages").fetch_one(&stack.pool).await?;
    let (segments, fresh, masks): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM knowledge_segments),
                (SELECT count(*) FROM knowledge_documents WHERE segment_id IS NULL),
                (SELECT count(*) FROM knowledge_masks)",
    )
    .fetch_one(&stack.pool)
    .await?;
    // Questions a visitor could ask about these documents: about one of the
    // subjects, or in words taken from a sentence.
    let mut rng = corpus::Rng::new(7);
    let questions: Vec<String> = (0..count)
        .map(|i| {
            let a = &abstracts[rng.below(abstracts.len())];
            if i % 2 == 0 {
                format!("What do you know about {}?", a.title)
            } else {
                let words: Vec<&str> = a.text.split_whitespace().collect();
                let start = rng.below(words.len().saturating_sub(8).max(1));
                format!("{}?", words[start..(start + 8).min(words.len())].join(" "))
            }
        })
        .collect();
    let speaker = speaker(&stack.agent)?;
    println!(
        "{passages} passages; the index: {segments} segments, {fresh} fresh documents, {masks} masks; \
         {} answers by {concurrency} concurrent askers per row",
        2 * questions.len()
    );
    println!("\n| figure | no statistics | after ANALYZE |\n| --- | ---: | ---: |");
    let cold = ask(&stack, &speaker, &questions, concurrency).await?;
    sqlx::query("ANALYZE").execute(&stack.pool).await?;
    let warm = ask(&stack, &speaker, &questions, concurrency).await?;
    stack.stop().await?;
    println!("| answers/s | {:.1} | {:.1} |", cold.rate, warm.rate);
    println!("| answers with sources | {} | {} |", cold.with_sources, warm.with_sources);
    println!(
        "| answer p50 / p99 | {:.1} / {:.1} ms | {:.1} / {:.1} ms |",
        cold.answer.0, cold.answer.1, warm.answer.0, warm.answer.1
    );
    println!(
        "| retrieval p50 / p99 | {:.1} / {:.1} ms | {:.1} / {:.1} ms |",
        cold.retrieval.0, cold.retrieval.1, warm.retrieval.0, warm.retrieval.1
    );
    Ok(())
}

/// What one round of questions measured.
struct Asked {
    rate: f64,
    with_sources: usize,
    /// p50, p99 in milliseconds.
    answer: (f64, f64),
    retrieval: (f64, f64),
}

/// Every question twice, `concurrency` askers at a time (after 20 to warm up).
async fn ask(stack: &Stack, speaker: &Speaker, questions: &[String], concurrency: usize) -> anyhow::Result<Asked> {
    for question in questions.iter().take(20) {
        answers::answer(&stack.pool, None, speaker, question).await?;
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let (pool, speaker) = (stack.pool.clone(), speaker.clone());
        let mine: Vec<String> = questions.iter().skip(worker).step_by(concurrency).cloned().collect();
        tasks.spawn(async move {
            let mut timings = Vec::new();
            for question in mine.iter().chain(mine.iter()) {
                let asked = Instant::now();
                let answer = answers::answer(&pool, None, &speaker, question).await?;
                timings.push((asked.elapsed(), answer.retrieval, !answer.sources.is_empty(), question.clone()));
            }
            anyhow::Ok(timings)
        });
    }
    let mut timings = Vec::new();
    for result in tasks.join_all().await {
        timings.extend(result?);
    }
    let elapsed = started.elapsed();
    // The slowest questions, to see what the tail is made of.
    timings.sort_by_key(|t| std::cmp::Reverse(t.1));
    for (_, retrieval, _, question) in timings.iter().take(3) {
        eprintln!("slow: {:.1} ms retrieving for {question:?}", retrieval.as_secs_f64() * 1e3);
    }
    let with_sources = timings.iter().filter(|t| t.2).count();
    let mut latency: Vec<Duration> = timings.iter().map(|t| t.0).collect();
    let mut retrieval: Vec<Duration> = timings.iter().map(|t| t.1).collect();
    latency.sort_unstable();
    retrieval.sort_unstable();
    let at = |v: &[Duration], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)].as_secs_f64() * 1e3;
    Ok(Asked {
        rate: timings.len() as f64 / elapsed.as_secs_f64(),
        with_sources,
        answer: (at(&latency, 0.5), at(&latency, 0.99)),
        retrieval: (at(&retrieval, 0.5), at(&retrieval, 0.99)),
    })
}
