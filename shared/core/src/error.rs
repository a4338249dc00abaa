//! The error type of the domain layer and the one place database failures are
//! mapped to problems.

use svc_contract::Problem;

/// What a handler or store function can fail with: a problem for the caller, or an
/// unexpected failure that is logged and answered `internal_error`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Problem(#[from] Problem),
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(message.into())
    }

    /// The problem answered to the caller. Unexpected failures are logged here,
    /// with their cause chain, and never reach the caller's eyes.
    pub fn into_problem(self) -> Problem {
        match self {
            Self::Problem(problem) => problem,
            Self::Database(error) => database_problem(error),
            Self::Internal(message) => {
                tracing::error!(error = %message, "internal error");
                Problem::internal()
            }
        }
    }
}

/// Row not found is `resource_not_found`; an unreachable or exhausted database,
/// or one whose schema is missing, is `internal_error` answered 503; anything else is logged and `internal_error`.
fn database_problem(error: sqlx::Error) -> Problem {
    match error {
        sqlx::Error::RowNotFound => Problem::not_found("resource"),
        // Input the schema admitted but PostgreSQL cannot store (an encoding it
        // refuses, a value too large for an index) is still the caller's input.
        sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("22021" | "22P05" | "54000")) => {
            Problem::invalid("unstorable_value", "A value in the input cannot be stored.")
        }
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => {
            tracing::warn!(error = %error, "database unavailable");
            Problem::unavailable()
        }
        // An unmigrated database (or one behind this binary): an operator's
        // `svc-api migrate` away from working, not a fault in the call.
        sqlx::Error::Database(db)
            if matches!(db.code().as_deref(), Some("42P01" | "42703" | "42704" | "42883" | "3F000")) =>
        {
            tracing::warn!(error = %db, "the database schema is missing or behind this binary: run `svc-api migrate`");
            Problem::unavailable()
        }
        // A lock or statement timeout, a deadlock or a serialization failure:
        // contention that a retry resolves; nothing was written.
        sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("55P03" | "57014" | "40P01" | "40001")) => {
            tracing::warn!(error = %db, "database contention");
            Problem::busy()
        }
        error => {
            tracing::error!(error = %error, source = ?std::error::Error::source(&error), "database error");
            Problem::internal()
        }
    }
}

/// Maps a violation of one named constraint to a precise problem.
pub trait OnConstraint<T> {
    fn on_constraint(self, name: &str, problem: impl FnOnce() -> Problem) -> Result<T>;
}

impl<T> OnConstraint<T> for std::result::Result<T, sqlx::Error> {
    fn on_constraint(self, name: &str, problem: impl FnOnce() -> Problem) -> Result<T> {
        match self {
            Err(sqlx::Error::Database(db)) if db.constraint() == Some(name) => Err(problem().into()),
            other => Ok(other?),
        }
    }
}

/// Whether `error` is a violation of the named constraint.
pub fn is_constraint(error: &sqlx::Error, name: &str) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.constraint() == Some(name))
}
