//! Why a model did not load.
//!
//! Every message names the file and the command that puts it right, because it
//! is read by whoever starts the service: the API and the worker stop at start
//! with it rather than answer without vectors.

use std::io;
use std::path::PathBuf;

/// A model file that is missing, unreadable, truncated, malformed or not the
/// pinned one. Each kind has its own message, so that a half-finished download
/// is not mistaken for a tampered file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is not there: the model was never fetched into this folder.
    #[error("{}: missing; run scripts/fetch-model", path.display())]
    Missing {
        /// The file looked for.
        path: PathBuf,
    },
    /// The file is there but cannot be read (permissions, a folder in its place).
    #[error("{}: cannot be read ({source}); run scripts/fetch-model", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file ends before what its own header promises: an interrupted copy.
    #[error("{}: truncated ({detail}); run scripts/fetch-model", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// How many bytes were promised and found.
        detail: String,
    },
    /// The file is complete but not what it should be: a header that does not
    /// parse, a tensor of the wrong type or shape, a tokenizer of another kind.
    #[error("{}: not a valid model file ({detail}); run scripts/fetch-model", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The file parses but is not the pinned one: corrupt, or another model.
    /// Vectors from another model would not be comparable with the stored ones.
    #[error(
        "{}: SHA-256 {actual} is not the pinned {expected} (corrupt, or another model); run scripts/fetch-model",
        path.display()
    )]
    Digest {
        /// The file.
        path: PathBuf,
        /// The digest the crate pins.
        expected: &'static str,
        /// The digest of the file found.
        actual: String,
    },
}
