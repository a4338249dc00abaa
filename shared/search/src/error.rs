//! What the index's operations fail with.

/// A failure of the index: the database's, or stored bytes it cannot read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Stored postings (or vectors) that do not decode: a bug or a corrupt
    /// row, never the caller's input.
    #[error("{0}")]
    Corrupt(String),
    /// The model could not embed (a remote one unreachable, say).
    #[error("embedding: {0}")]
    Embedding(String),
}

pub type Result<T> = std::result::Result<T, Error>;
