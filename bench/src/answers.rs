//! Answers: quality and speed of the answer engine.
//!
//! - Quality: nDCG@5 of an answer's `sources` on labelled sets in BEIR format
//!   (`--quality DIR`, repeatable; by default the public set in
//!   `../shared/data/retrieval/dbpedia`): each document one Knowledge Source,
//!   ingested through the real API and workers, each question asked once.
//!   Beside it, BM25 (the `bm25s` Python library: English stemmer and stop
//!   words) on the same documents and questions in the same run
//!   (`bench/bm25_baseline.py`), overall and per question `kind` when the
//!   questions carry one.
//! - Speed: answers/s and latency of the extractive engine for an Agent holding
//!   `--sources` sources of about `--size` bytes each (by default 100 of
//!   750,000; 100,000 of 400 is a help centre of FAQ entries), added through
//!   the real API and workers, with the retrieval time per question apart:
//!   first with no table statistics at all (autovacuum is off here, and a
//!   bulk import into a new Agent runs ahead of it anywhere), then after
//!   `ANALYZE`.
//!
//! `cargo build --release --workspace --bins &&
//!  target/release/svc-bench answers [--only quality|speed] [--quality DIR ...] [--corpus PATH]
//!  [--concurrency 8] [--questions 200] [--sources 100] [--size 750000]`

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use svc_contract::resources::Language;
use svc_core::answers::{self, Meaning, Speaker};
use svc_core::ids::AgentId;

use crate::common::Stack;
use crate::corpus;

/// One half of the benchmark.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Half {
    /// nDCG@5 beside BM25 on each `--quality` set.
    Quality,
    /// Answers/s and latency over `--sources` sources of `--size` bytes.
    Speed,
}

/// `svc-bench answers`.
#[derive(clap::Args)]
pub struct Options {
    /// Runs one half only [default: both, quality first].
    #[arg(long, value_enum, value_name = "HALF")]
    only: Option<Half>,
    /// A labelled set in BEIR format to measure ranking quality on: a folder
    /// of corpus.jsonl (_id, title, text), queries.jsonl (_id, text, and an
    /// optional kind) and qrels/test.tsv. Repeat it for several sets, each
    /// measured in an Agent of its own and printed in its own table.
    #[arg(
        long,
        visible_alias = "dataset",
        value_name = "DATASET",
        default_values_os_t = [default_dataset()],
        help_heading = "Quality"
    )]
    quality: Vec<PathBuf>,
    /// The corpus.jsonl the sources' text and the questions are drawn from.
    #[arg(long, default_value_os_t = corpus::default_path(), value_name = "PATH", help_heading = "Speed")]
    corpus: PathBuf,
    /// Askers at once.
    #[arg(long, default_value_t = 8, value_name = "N", help_heading = "Speed")]
    concurrency: usize,
    /// Questions, each asked twice (after 20 to warm up), without and then with table statistics.
    #[arg(long, default_value_t = 200, value_name = "N", help_heading = "Speed")]
    questions: usize,
    /// Sources in the Agent.
    #[arg(long, default_value_t = 100, value_name = "N", help_heading = "Speed")]
    sources: usize,
    /// Size of each source, about (bytes).
    #[arg(long, default_value_t = 750_000, value_name = "N", help_heading = "Speed")]
    size: usize,
}

/// The public labelled set beside the repository.
fn default_dataset() -> PathBuf {
    corpus::beside_project("shared/data/retrieval/dbpedia")
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    if options.only != Some(Half::Speed) {
        // Every set is read first, so that a wrong path fails before the long part.
        let datasets =
            options.quality.iter().map(|folder| Dataset::read(folder)).collect::<anyhow::Result<Vec<_>>>()?;
        for dataset in &datasets {
            quality(dataset).await?;
        }
    }
    if options.only != Some(Half::Quality) {
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

/// A question of a labelled set.
struct Query {
    id: String,
    text: String,
    /// What sort of question it is (e.g. `paraphrase` or `lexical`), when the set says.
    kind: Option<String>,
}

/// A labelled set in BEIR format.
struct Dataset {
    name: String,
    folder: PathBuf,
    /// `(key, title, content)` of each document, as Knowledge Sources.
    documents: Vec<(String, String, String)>,
    queries: Vec<Query>,
    /// Query id to document id to grade.
    judged: HashMap<String, HashMap<String, u32>>,
}

impl Dataset {
    fn read(folder: &Path) -> anyhow::Result<Self> {
        let field = |value: &Value, name: &str, file: &str| -> anyhow::Result<String> {
            value[name].as_str().map(str::to_owned).with_context(|| format!("{file}: a line without {name}: {value}"))
        };
        let mut documents = Vec::new();
        for document in lines(&folder.join("corpus.jsonl"))? {
            let title: String = document["title"].as_str().unwrap_or_default().chars().take(240).collect();
            let title = if title.trim().is_empty() { "Untitled".to_owned() } else { title };
            let text = document["text"].as_str().unwrap_or_default().to_owned();
            documents.push((field(&document, "_id", "corpus.jsonl")?, title, text));
        }
        let mut queries = Vec::new();
        for query in lines(&folder.join("queries.jsonl"))? {
            queries.push(Query {
                id: field(&query, "_id", "queries.jsonl")?,
                text: field(&query, "text", "queries.jsonl")?,
                kind: query["kind"].as_str().map(str::to_owned),
            });
        }
        let qrels = folder.join("qrels/test.tsv");
        let qrels = std::fs::read_to_string(&qrels).with_context(|| format!("read {}", qrels.display()))?;
        let mut judged: HashMap<String, HashMap<String, u32>> = HashMap::new();
        for line in qrels.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let mut fields = line.split('\t');
            if let (Some(q), Some(d), Some(g)) = (fields.next(), fields.next(), fields.next()) {
                let grade = g.trim().parse().with_context(|| format!("qrels/test.tsv: a grade of {g:?}"))?;
                judged.entry(q.to_owned()).or_default().insert(d.to_owned(), grade);
            }
        }
        anyhow::ensure!(
            !documents.is_empty() && !queries.is_empty(),
            "{}: no documents or no questions",
            folder.display()
        );
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
        let name =
            folder.file_name().map_or_else(|| folder.display().to_string(), |n| n.to_string_lossy().into_owned());
        Ok(Self { name, folder, documents, queries, judged })
    }

    /// The table's rows: every question, then those of each kind in the order
    /// the kinds first appear (when any question has one), as indices into
    /// `queries`.
    fn groups(&self) -> Vec<(String, Vec<usize>)> {
        let mut groups = vec![("all".to_owned(), (0..self.queries.len()).collect::<Vec<_>>())];
        if self.queries.iter().any(|q| q.kind.is_some()) {
            for (i, query) in self.queries.iter().enumerate() {
                let kind = format!("kind {}", query.kind.as_deref().unwrap_or("(none)"));
                match groups.iter_mut().skip(1).find(|(name, _)| *name == kind) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((kind, vec![i])),
                }
            }
        }
        groups
    }
}

/// nDCG@5 of every question of `dataset`, asked of an Agent that holds each
/// of its documents as one Knowledge Source (added through the real API,
/// processed by two real workers), beside BM25's; then the table.
async fn quality(dataset: &Dataset) -> anyhow::Result<()> {
    println!(
        "\nsvc-bench answers (quality): {} ({}): {} documents, {} questions",
        dataset.name,
        dataset.folder.display(),
        dataset.documents.len(),
        dataset.queries.len()
    );
    let stack = Stack::start("answersq", 2).await?;
    let started = Instant::now();
    stack.add_all(dataset.documents.clone(), 8).await?;
    stack.wait_active(dataset.documents.len() as i64).await?;
    eprintln!("{} sources active in {:.1} s", dataset.documents.len(), started.elapsed().as_secs_f64());
    let keys: HashMap<String, String> =
        sqlx::query_as::<_, (uuid::Uuid, String)>("SELECT id, key FROM knowledge_sources")
            .fetch_all(&stack.pool)
            .await?
            .into_iter()
            .map(|(id, key)| (svc_core::ids::SourceId(id).to_string(), key))
            .collect();
    let speaker = speaker(&stack.agent)?;
    let unjudged = HashMap::new();
    // The same index asked twice: by words alone (BM25F), then by words and
    // meaning (what the service answers with, unless SVC_EMBEDDINGS=off).
    let mut words = Vec::with_capacity(dataset.queries.len());
    let mut both = Vec::with_capacity(dataset.queries.len());
    for query in &dataset.queries {
        let judged = dataset.judged.get(&query.id).unwrap_or(&unjudged);
        for (meaning, scores) in [(None, &mut words), (stack.meaning.as_deref(), &mut both)] {
            let answer = answers::answer(&stack.pool, None, meaning, &speaker, &query.text).await?;
            let ranked: Vec<String> =
                answer.sources.iter().filter_map(|s| keys.get(&s.id.to_string()).cloned()).collect();
            scores.push(ndcg5(&ranked, judged));
        }
    }
    let model = stack.meaning.as_ref().and_then(|m| m.models.primary()).map_or("off", |m| m.id()).to_owned();
    stack.stop().await?;
    let bm25 = bm25(&dataset.folder)
        .map(|scores| dataset.queries.iter().map(|q| scores.get(&q.id).copied().unwrap_or(0.0)).collect::<Vec<f64>>());
    let mean =
        |scores: &[f64], members: &[usize]| members.iter().map(|&i| scores[i]).sum::<f64>() / members.len() as f64;
    println!(
        "\n| questions | count | svc words (BM25F) | svc words + meaning | BM25 nDCG@5 | svc / BM25 |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for (name, members) in dataset.groups() {
        let by_words = mean(&words, &members);
        let svc = mean(&both, &members);
        let (bm25, ratio) = match &bm25 {
            Ok(scores) => {
                let bm25 = mean(scores, &members);
                (format!("{bm25:.4}"), if bm25 > 0.0 { format!("{:.2}", svc / bm25) } else { "-".to_owned() })
            }
            Err(_) => ("not run".to_owned(), "-".to_owned()),
        };
        println!("| {name} | {} | {by_words:.4} | {svc:.4} | {bm25} | {ratio} |", members.len());
    }
    match &bm25 {
        Ok(_) => println!(
            "\nsvc: nDCG@5 of the sources of each answer, best first (meaning: {model}; the ratio is of words + \
             meaning); BM25: bm25s, English stemmer and stop words, title + text."
        ),
        Err(why) => println!("\nBM25 not run: {why}"),
    }
    Ok(())
}

/// The BM25 baseline's packages, pinned, and where they are installed.
const BM25_REQUIREMENTS: &str = include_str!("../bm25_baseline.requirements.txt");

/// Each question's nDCG@5 by BM25 (`bench/bm25_baseline.py --json`), or why
/// it could not be run. It runs in `target/bm25-venv`, made with the pinned
/// packages on first use; where that cannot be made (no package registry),
/// in `python3` as it is.
fn bm25(dataset: &Path) -> Result<HashMap<String, f64>, String> {
    let python = match baseline_python() {
        Ok(python) => python,
        Err(error) => {
            eprintln!("BM25: no virtualenv ({error:#}); trying python3 as it is");
            PathBuf::from("python3")
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bm25_baseline.py");
    let output = std::process::Command::new(&python)
        .arg(script)
        .arg("--json")
        .arg(dataset)
        .output()
        .map_err(|error| format!("{}: {error}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{} (pip install -r bench/bm25_baseline.requirements.txt)",
            stderr.lines().last().unwrap_or("bm25_baseline.py failed")
        ));
    }
    #[derive(serde::Deserialize)]
    struct Baseline {
        ndcg5: HashMap<String, f64>,
    }
    serde_json::from_slice::<Baseline>(&output.stdout)
        .map(|baseline| baseline.ndcg5)
        .map_err(|error| format!("bm25_baseline.py printed no figures: {error}"))
}

/// `target/bm25-venv/bin/python3`, the virtualenv made (again) when its
/// packages are not the pinned ones.
fn baseline_python() -> anyhow::Result<PathBuf> {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("the repository")?;
    let venv = repository.join("target/bm25-venv");
    let python = venv.join("bin/python3");
    let stamp = venv.join(".svc-requirements.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|installed| installed == BM25_REQUIREMENTS) {
        return Ok(python);
    }
    eprintln!("BM25: installing the pinned bm25s and PyStemmer into {}", venv.display());
    let run = |command: &mut std::process::Command| -> anyhow::Result<()> {
        let output = command.output().with_context(|| format!("run {command:?}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::ensure!(output.status.success(), "{command:?}: {}", stderr.lines().last().unwrap_or_default());
        Ok(())
    };
    let _ = std::fs::remove_dir_all(&venv);
    run(std::process::Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    let requirements = venv.join("requirements.txt");
    std::fs::write(&requirements, BM25_REQUIREMENTS)?;
    run(std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r"])
        .arg(&requirements))?;
    std::fs::write(&stamp, BM25_REQUIREMENTS)?;
    Ok(python)
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
    let abstracts = corpus::read(&options.corpus)?;
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
    // Words and meaning (what the service answers with) before and after
    // ANALYZE, then by words alone, the same questions of the same index.
    let meaning = stack.meaning.clone();
    let cold = ask(&stack, &speaker, &questions, concurrency, meaning.clone()).await?;
    sqlx::query("ANALYZE").execute(&stack.pool).await?;
    let warm = ask(&stack, &speaker, &questions, concurrency, meaning).await?;
    let words = ask(&stack, &speaker, &questions, concurrency, None).await?;
    let kept = stack.meaning.as_ref().map(|m| m.cache.figures());
    stack.stop().await?;
    println!("\n| figure | no statistics | after ANALYZE | words alone, after ANALYZE |\n| --- | ---: | ---: | ---: |");
    let row = |name: &str, figure: &dyn Fn(&Asked) -> String| {
        println!("| {name} | {} | {} | {} |", figure(&cold), figure(&warm), figure(&words));
    };
    row("answers/s", &|a| format!("{:.1}", a.rate));
    row("answers with sources", &|a| a.with_sources.to_string());
    row("answer p50 / p99", &|a| format!("{:.1} / {:.1} ms", a.answer.0, a.answer.1));
    row("retrieval p50 / p99", &|a| format!("{:.1} / {:.1} ms", a.retrieval.0, a.retrieval.1));
    // What answering by meaning holds in memory: the vectors kept, and this
    // process (the API in it) at its largest.
    if let Some(kept) = kept {
        println!(
            "\nvectors kept: {:.1} MB in {} blocks (svc_vector_cache_bytes; limit {:.0} MB); {} hits, {} misses",
            kept.bytes as f64 / 1e6,
            kept.blocks,
            kept.max_bytes as f64 / 1e6,
            kept.hits,
            kept.misses
        );
    }
    if let Some((rss, peak)) = memory() {
        println!(
            "process memory (API in-process, with the load generator): {rss:.0} MB resident, {peak:.0} MB at most"
        );
    }
    Ok(())
}

/// This process's resident memory and its peak, in MB (Linux).
fn memory() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1e3)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What one round of questions measured.
struct Asked {
    rate: f64,
    with_sources: usize,
    /// p50, p99 in milliseconds.
    answer: (f64, f64),
    retrieval: (f64, f64),
}

/// Every question twice, `concurrency` askers at a time (after 20 to warm up),
/// by words and `meaning` (by words alone without it).
async fn ask(
    stack: &Stack,
    speaker: &Speaker,
    questions: &[String],
    concurrency: usize,
    meaning: Option<Arc<Meaning>>,
) -> anyhow::Result<Asked> {
    for question in questions.iter().take(20) {
        answers::answer(&stack.pool, None, meaning.as_deref(), speaker, question).await?;
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let (pool, speaker, meaning) = (stack.pool.clone(), speaker.clone(), meaning.clone());
        let mine: Vec<String> = questions.iter().skip(worker).step_by(concurrency).cloned().collect();
        tasks.spawn(async move {
            let mut timings = Vec::new();
            for question in mine.iter().chain(mine.iter()) {
                let asked = Instant::now();
                let answer = answers::answer(&pool, None, meaning.as_deref(), &speaker, question).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Benchmark, parse};

    fn answers(args: &[&str]) -> Options {
        let args: Vec<&str> = std::iter::once("answers").chain(args.iter().copied()).collect();
        let Ok(Benchmark::Answers(options)) = parse(&args) else { panic!("answers {args:?}") };
        options
    }

    #[test]
    fn quality_sets_repeat_and_dataset_is_the_same_option() {
        let options = answers(&[]);
        assert_eq!(options.quality, [default_dataset()]);
        assert!(options.only.is_none() && options.corpus == corpus::default_path());
        assert_eq!((options.concurrency, options.questions, options.sources, options.size), (8, 200, 100, 750_000));
        let options = answers(&["--only", "quality", "--quality", "a", "--dataset", "b", "--quality=c"]);
        assert_eq!(options.quality, [Path::new("a"), Path::new("b"), Path::new("c")]);
        assert!(options.only == Some(Half::Quality));
    }

    #[test]
    fn the_paraphrase_set_reads_with_its_kinds() {
        let dataset = Dataset::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("data/paraphrase")).unwrap();
        assert_eq!((dataset.name.as_str(), dataset.documents.len(), dataset.queries.len()), ("paraphrase", 110, 133));
        let groups: Vec<(String, usize)> = dataset.groups().into_iter().map(|(name, m)| (name, m.len())).collect();
        let expected = [("all", 133), ("kind paraphrase", 95), ("kind lexical", 38)];
        assert_eq!(groups, expected.map(|(name, n)| (name.to_owned(), n)));
        assert!(dataset.queries.iter().all(|q| dataset.judged[&q.id].values().any(|&g| g == 2)));
    }

    #[test]
    fn ndcg_at_5_is_the_standard_one() {
        let grades = HashMap::from([("a".to_owned(), 2), ("b".to_owned(), 1), ("c".to_owned(), 0)]);
        let ranked = |ids: &[&str]| ids.iter().map(|&s| s.to_owned()).collect::<Vec<_>>();
        assert!((ndcg5(&ranked(&["a", "b"]), &grades) - 1.0).abs() < 1e-12);
        let swapped = (1.0 + 2.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        assert!(
            (ndcg5(&ranked(&["x", "b", "a"]), &grades) - (1.0 / 3f64.log2() + 2.0 / 2.0) / (2.0 + 1.0 / 3f64.log2()))
                .abs()
                < 1e-12
        );
        assert!((ndcg5(&ranked(&["b", "a"]), &grades) - swapped).abs() < 1e-12);
        assert_eq!(ndcg5(&ranked(&["x", "y", "z", "w", "v", "a"]), &grades), 0.0);
        assert_eq!(ndcg5(&ranked(&["a"]), &HashMap::new()), 0.0);
    }
}
