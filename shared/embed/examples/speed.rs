//! What embedding and an exact int8 scan cost on this machine. Prints figures,
//! asserts nothing: run it with `--release` for numbers worth quoting.
//!
//!   cargo run --release -p svc-embed --example speed [DBPEDIA_DIR]
//!
//! DBPEDIA_DIR holds `corpus.jsonl` and `queries.jsonl` (default
//! `../shared/data/retrieval/dbpedia` beside the repository); the model comes
//! from `SVC_EMBEDDINGS_MODEL_DIR` or `models/potion-base-8M`.

use std::error::Error;
use std::fs;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use svc_embed::{StaticModel, dot, quantize};

/// Passages the scan goes over: the target for one Agent.
const SCAN_VECTORS: usize = 100_000;
const SCAN_QUERIES: usize = 50;
/// How many best passages the scan keeps, as the answers path would.
const TOP: usize = 10;

fn main() -> Result<(), Box<dyn Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let data =
        std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| root.join("../shared/data/retrieval/dbpedia"));
    let model_dir = std::env::var_os("SVC_EMBEDDINGS_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("models/potion-base-8M"));

    let started = Instant::now();
    let model = StaticModel::load(&model_dir)?;
    println!("load (read, SHA-256, parse): {:.0} ms", started.elapsed().as_secs_f64() * 1e3);

    let passages = texts(&data.join("corpus.jsonl"), true)?;
    let questions = texts(&data.join("queries.jsonl"), false)?;
    let chars: usize = passages.iter().map(|p| p.chars().count()).sum();
    let started = Instant::now();
    let vectors: Vec<Vec<f32>> = passages.iter().map(|p| model.embed(p)).collect();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "passages: {} ({} characters on average): {:.0} passages/s, {:.1} µs each",
        passages.len(),
        chars / passages.len().max(1),
        passages.len() as f64 / seconds,
        seconds * 1e6 / passages.len().max(1) as f64
    );
    black_box(&vectors);

    let started = Instant::now();
    for _ in 0..10 {
        for question in &questions {
            black_box(model.embed(black_box(question)));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("questions: {}: {:.4} ms each", questions.len(), seconds * 1e3 / (10 * questions.len().max(1)) as f64);

    scan(model.dim());
    Ok(())
}

/// `title text` of each line of a BEIR-style JSON lines file, or `text` alone.
fn texts(path: &std::path::Path, with_title: bool) -> Result<Vec<String>, Box<dyn Error>> {
    let body = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let value: serde_json::Value = serde_json::from_str(line)?;
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or("").to_owned();
        out.push(if with_title { format!("{} {}", field("title"), field("text")) } else { field("text") });
    }
    Ok(out)
}

/// An exact scan over `SCAN_VECTORS` random unit vectors stored as one
/// contiguous int8 block with a scale each, as a segment would hold them,
/// keeping the best `TOP`.
fn scan(dim: usize) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random_unit = || {
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
    };
    let mut block = Vec::with_capacity(SCAN_VECTORS * dim);
    let mut scales = Vec::with_capacity(SCAN_VECTORS);
    for _ in 0..SCAN_VECTORS {
        let q = quantize(&random_unit());
        block.extend_from_slice(&q.values);
        scales.push(q.scale);
    }
    let queries: Vec<_> = (0..SCAN_QUERIES).map(|_| quantize(&random_unit())).collect();

    let started = Instant::now();
    for query in &queries {
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(TOP + 1);
        for (i, (doc, &scale)) in block.chunks_exact(dim).zip(&scales).enumerate() {
            let score = dot(&query.values, doc) as f32 * query.scale * scale;
            if best.len() < TOP || score > best[best.len() - 1].0 {
                let at = best.partition_point(|&(s, _)| s >= score);
                best.insert(at, (score, i));
                best.truncate(TOP);
            }
        }
        black_box(best);
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "int8 scan: {SCAN_VECTORS} × {dim} ({:.1} MB): {:.2} ms per query, top {TOP}",
        (block.len() + 4 * scales.len()) as f64 / 1e6,
        seconds * 1e3 / SCAN_QUERIES as f64
    );
}
