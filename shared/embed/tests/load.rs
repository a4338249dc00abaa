//! A missing, truncated or altered model stops `load` with a message that
//! names the file and the command that fetches it.

#[path = "../src/testing.rs"]
mod testing;

use std::fs;
use std::path::{Path, PathBuf};

use svc_embed::{LoadError, StaticModel};

/// A folder of its own under the temporary directory, removed when dropped
/// (a failing test included).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("svc-embed-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }

    /// Writes `bytes` as `name` in the folder.
    fn put(&self, name: &str, bytes: &[u8]) {
        fs::write(self.0.join(name), bytes).expect("a scratch file");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn original(name: &str) -> Vec<u8> {
    let path = testing::model_dir().join(name);
    fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run scripts/fetch-model", path.display()))
}

/// The error of loading `dir`, and its message, which must name `file` in
/// `dir` and the command.
fn failure(dir: &Path, file: &str) -> (LoadError, String) {
    let error = StaticModel::load(dir).expect_err("the model should not load");
    let message = error.to_string();
    let path = dir.join(file);
    assert!(message.starts_with(&format!("{}: ", path.display())), "{message}");
    assert!(message.ends_with("; run scripts/fetch-model"), "{message}");
    (error, message)
}

#[test]
fn the_fetched_model_loads() {
    let model = StaticModel::load(&testing::model_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.dim(), 256);
}

#[test]
fn a_missing_folder_names_the_model_file() {
    let dir = Path::new("models/no-such-model");
    let (error, message) = failure(dir, "model.safetensors");
    assert!(matches!(error, LoadError::Missing { .. }), "{error:?}");
    assert_eq!(message, "models/no-such-model/model.safetensors: missing; run scripts/fetch-model");
}

#[test]
fn a_missing_tokenizer_is_named() {
    let scratch = Scratch::new("no-tokenizer");
    scratch.put("model.safetensors", &original("model.safetensors"));
    let (error, message) = failure(&scratch.0, "tokenizer.json");
    assert!(matches!(error, LoadError::Missing { .. }), "{message}");
}

#[test]
fn a_truncated_model_says_truncated() {
    let scratch = Scratch::new("truncated");
    let model = original("model.safetensors");
    scratch.put("tokenizer.json", &original("tokenizer.json"));
    for cut in [0, 5, 60, model.len() / 2, model.len() - 1] {
        scratch.put("model.safetensors", &model[..cut]);
        let (error, message) = failure(&scratch.0, "model.safetensors");
        assert!(matches!(error, LoadError::Truncated { .. }), "cut at {cut}: {message}");
        assert!(message.contains(": truncated ("), "{message}");
    }
}

#[test]
fn a_garbled_header_says_not_valid() {
    let scratch = Scratch::new("garbled");
    let mut model = original("model.safetensors");
    model[8] = b'!';
    scratch.put("model.safetensors", &model);
    scratch.put("tokenizer.json", &original("tokenizer.json"));
    let (error, message) = failure(&scratch.0, "model.safetensors");
    assert!(matches!(error, LoadError::Malformed { .. }), "{message}");
    assert!(message.contains("not a valid model file (header is not JSON"), "{message}");
}

#[test]
fn an_altered_model_fails_its_digest() {
    let scratch = Scratch::new("altered");
    let mut model = original("model.safetensors");
    let last = model.len() - 1;
    model[last] ^= 1;
    scratch.put("model.safetensors", &model);
    scratch.put("tokenizer.json", &original("tokenizer.json"));
    let (error, message) = failure(&scratch.0, "model.safetensors");
    assert!(matches!(error, LoadError::Digest { .. }), "{message}");
    assert!(
        message.contains("is not the pinned f65d0f325faadc1e121c319e2faa41170d3fa07d8c89abd48ca5358d9a223de2"),
        "{message}"
    );
}

#[test]
fn an_altered_or_truncated_tokenizer_is_named() {
    let scratch = Scratch::new("tokenizer");
    scratch.put("model.safetensors", &original("model.safetensors"));
    let mut tokenizer = original("tokenizer.json");
    scratch.put("tokenizer.json", &tokenizer[..tokenizer.len() / 2]);
    let (error, message) = failure(&scratch.0, "tokenizer.json");
    assert!(matches!(error, LoadError::Malformed { .. }), "{message}");
    tokenizer.extend_from_slice(b"\n");
    scratch.put("tokenizer.json", &tokenizer);
    let (error, message) = failure(&scratch.0, "tokenizer.json");
    assert!(matches!(error, LoadError::Digest { .. }), "{message}");
}
