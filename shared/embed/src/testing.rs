//! Where the tests find the model: `SVC_EMBEDDINGS_MODEL_DIR`, or
//! `models/potion-base-8M` in the repository, where `scripts/fetch-model`
//! puts it. Tests that need it fail without it (with the command to run):
//! skipping would let a machine without the model pass them unnoticed.
//! Shared with the integration tests through `#[path]`.

use std::path::PathBuf;

/// The folder holding the model files.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("SVC_EMBEDDINGS_MODEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/potion-base-8M"),
    }
}
