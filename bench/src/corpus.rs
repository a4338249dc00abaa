//! Varied, realistic text for benchmarks: documents assembled from the DBpedia
//! abstracts of the public retrieval set (`../shared/data/retrieval/`), shuffled
//! per document by a seeded generator, with a heading every few paragraphs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// The retrieval set's corpus, beside the project (`--corpus` overrides it).
pub fn default_path() -> PathBuf {
    beside_project("shared/data/retrieval/dbpedia/corpus.jsonl")
}

/// `path` in the folder that holds the repository, without `..` where it exists.
pub fn beside_project(path: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// A title and a text.
pub struct Abstract {
    pub title: String,
    pub text: String,
}

/// Reads `corpus.jsonl`: one `{_id, title, text}` per line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Abstract>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut abstracts = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line)?;
        let body = value["text"].as_str().unwrap_or_default();
        // The set's texts end in an RDF language tag and source URL: not prose.
        let body = body.split(" @en").next().unwrap_or(body).trim();
        if !body.is_empty() {
            abstracts.push(Abstract {
                title: value["title"].as_str().unwrap_or_default().to_owned(),
                text: body.to_owned(),
            });
        }
    }
    anyhow::ensure!(!abstracts.is_empty(), "no abstracts in {}", path.display());
    Ok(abstracts)
}

/// xorshift64*: small, fast, and the same sequence for the same seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// Document `seed` of at most `bytes` bytes (and close to it): a title, then
/// paragraphs drawn from the abstracts, a `##` heading every five. The
/// paragraph that does not fit whole is cut after its last word that does, so
/// a short document is not a title alone when its first abstract is long.
pub fn document(abstracts: &[Abstract], seed: u64, bytes: usize) -> String {
    let mut rng = Rng::new(seed + 1);
    let mut out = format!("# {}\n\n", abstracts[rng.below(abstracts.len())].title);
    let mut paragraphs = 0;
    loop {
        let next = &abstracts[rng.below(abstracts.len())];
        let heading = (paragraphs % 5 == 4).then(|| format!("## {}\n\n", next.title));
        let piece = format!("{}{}\n\n", heading.unwrap_or_default(), next.text);
        if out.len() + piece.len() > bytes {
            let room = bytes.saturating_sub(out.len() + "\n\n".len());
            let cut = next.text.match_indices(' ').map(|(at, _)| at).take_while(|&at| at <= room).last();
            if let Some(cut) = cut {
                out.push_str(&next.text[..cut]);
                out.push_str("\n\n");
            }
            break;
        }
        out.push_str(&piece);
        paragraphs += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_close_to_its_size_even_when_abstracts_are_long() {
        let long = "word ".repeat(200);
        let abstracts = [
            Abstract { title: "Alpha".into(), text: long.trim().to_owned() },
            Abstract { title: "Beta".into(), text: "A short one.".into() },
        ];
        for seed in 0..20 {
            let document = document(&abstracts, seed, 400);
            assert!((350..=400).contains(&document.len()), "{} bytes: {document:?}", document.len());
            assert!(document.lines().any(|l| !l.is_empty() && !l.starts_with('#')), "{document:?}");
        }
    }
}
