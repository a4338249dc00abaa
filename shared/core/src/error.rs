//! The error type of the domain layer and the one place database failures are
//! classified and mapped to problems.

use svc_contract::Problem;

/// What a handler or store function can fail with: a problem for the caller, or an
/// unexpected failure that is logged and answered `internal_error`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Problem(#[from] Problem),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure a database error is: whether trying again can help, and
/// how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The connection or the server went away (a terminated backend, a reset,
    /// a failover): nothing more was done on it. Another connection may work at
    /// once. A statement that was sent may or may not have committed.
    ConnectionLost,
    /// No connection could be had (the pool timed out or is closed), or the
    /// database is not migrated for this binary: the database is unavailable.
    Unavailable,
    /// A lock or statement timeout, a deadlock, a serialization failure: the
    /// transaction was rolled back; it may succeed once the other holder is done.
    Contention,
    /// Anything else: a bug or bad data, not to be retried.
    Permanent,
}

impl Fault {
    /// Whether waiting and trying again can succeed.
    pub fn is_transient(self) -> bool {
        !matches!(self, Self::Permanent)
    }
}

impl From<svc_search::Error> for Error {
    fn from(error: svc_search::Error) -> Self {
        match error {
            svc_search::Error::Database(error) => Self::Database(error),
            svc_search::Error::Corrupt(message) => Self::Internal(message),
            svc_search::Error::Embedding(message) => Self::Internal(format!("embedding: {message}")),
        }
    }
}

/// The one meaning of transient in background work (an attempt's steps, and
/// the worker's jobs around them): whether to wait and try the same step
/// again. The connection went away, the database is unavailable for a while,
/// or another holder's lock was in the way (a lock timeout, a deadlock, a
/// serialization failure). A statement timeout is not: the step itself is too
/// slow, and repeating it would only repeat that; it ends the attempt, which
/// counts, once.
pub fn worth_waiting_for(error: &Error) -> bool {
    let Error::Database(error) = error else { return false };
    match fault(error) {
        Fault::ConnectionLost | Fault::Unavailable => true,
        Fault::Contention => !matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014")),
        Fault::Permanent => false,
    }
}

/// Classifies a database error (see docs/decisions.md, "Which database errors
/// are transient").
pub fn fault(error: &sqlx::Error) -> Fault {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => Fault::ConnectionLost,
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => Fault::Unavailable,
        sqlx::Error::Database(db) => sqlstate_fault(db.code().as_deref().unwrap_or_default()),
        _ => Fault::Permanent,
    }
}

/// The fault an SQLSTATE stands for.
fn sqlstate_fault(code: &str) -> Fault {
    match code {
        // Class 08: connection exception. 57P01 admin shutdown (pg_terminate_backend,
        // a restart), 57P02 crash shutdown, 57P03 cannot connect now (starting or
        // in recovery), 57P05 idle session timeout, 25P03 idle-in-transaction
        // timeout: each ends the session.
        c if c.starts_with("08") => Fault::ConnectionLost,
        "57P01" | "57P02" | "57P03" | "57P05" | "25P03" => Fault::ConnectionLost,
        // An unmigrated database (or one behind this binary): an operator's
        // `svc-api migrate` away from working, not a fault in the call.
        "42P01" | "42703" | "42704" | "42883" | "3F000" => Fault::Unavailable,
        // Lock and statement timeouts, deadlocks, serialization failures.
        "55P03" | "57014" | "40P01" | "40001" => Fault::Contention,
        _ => Fault::Permanent,
    }
}

impl Error {
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(message.into())
    }

    /// The fault behind a database error; every other error is permanent.
    pub fn fault(&self) -> Fault {
        match self {
            Self::Database(error) => fault(error),
            Self::Problem(_) | Self::Internal(_) => Fault::Permanent,
        }
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

/// An error with its causes, "outer: inner: innermost", for logs.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // A wrapper's message often quotes its cause (thiserror's `{0}`,
        // sqlx's "error returned from database: ..."): say it once.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Row not found is `resource_not_found`; a value PostgreSQL cannot store is the
/// caller's `invalid_request`; every transient fault is `internal_error` answered
/// 503 with `Retry-After`; anything else is logged and `internal_error` (500).
fn database_problem(error: sqlx::Error) -> Problem {
    if let sqlx::Error::RowNotFound = error {
        return Problem::not_found("resource");
    }
    // Input the schema admitted but PostgreSQL cannot store (an encoding it
    // refuses, a value too large for an index) is still the caller's input.
    if let sqlx::Error::Database(db) = &error
        && matches!(db.code().as_deref(), Some("22021" | "22P05" | "54000"))
    {
        return Problem::invalid("unstorable_value", "A value in the input cannot be stored.");
    }
    match fault(&error) {
        Fault::ConnectionLost => {
            crate::faults::connection_lost();
            tracing::warn!(error = %chain(&error), "database connection lost");
            Problem::unavailable()
        }
        Fault::Unavailable => {
            tracing::warn!(error = %chain(&error), "database unavailable (run `svc-api migrate` if the schema is missing)");
            Problem::unavailable()
        }
        Fault::Contention => {
            tracing::warn!(error = %chain(&error), "database contention");
            Problem::busy()
        }
        Fault::Permanent => {
            tracing::error!(error = %chain(&error), "database error");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_are_classified() {
        for code in ["08000", "08003", "08006", "08P01", "57P01", "57P02", "57P03", "57P05", "25P03"] {
            assert_eq!(sqlstate_fault(code), Fault::ConnectionLost, "{code}");
        }
        for code in ["55P03", "57014", "40P01", "40001"] {
            assert_eq!(sqlstate_fault(code), Fault::Contention, "{code}");
        }
        for code in ["42P01", "3F000"] {
            assert_eq!(sqlstate_fault(code), Fault::Unavailable, "{code}");
        }
        // An unexpected constraint, a syntax error, a division by zero: bugs.
        for code in ["23505", "23514", "42601", "22012", "XX000", ""] {
            assert_eq!(sqlstate_fault(code), Fault::Permanent, "{code}");
        }
    }

    #[test]
    fn io_errors_and_pool_failures_are_transient_decode_errors_are_not() {
        let reset = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(fault(&reset), Fault::ConnectionLost);
        let eof = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert_eq!(fault(&eof), Fault::ConnectionLost);
        assert_eq!(fault(&sqlx::Error::PoolTimedOut), Fault::Unavailable);
        assert_eq!(fault(&sqlx::Error::PoolClosed), Fault::Unavailable);
        assert_eq!(fault(&sqlx::Error::RowNotFound), Fault::Permanent);
        assert_eq!(fault(&sqlx::Error::Decode("bad".into())), Fault::Permanent);
        assert_eq!(fault(&sqlx::Error::Protocol("out of sync".into())), Fault::Permanent);
    }

    #[test]
    fn transient_faults_answer_503_and_bugs_500() {
        let lost = Error::from(sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::BrokenPipe)));
        assert_eq!(lost.fault(), Fault::ConnectionLost);
        let problem = lost.into_problem();
        assert_eq!(problem.http_status(), 503);
        assert!(problem.unavailable);
        let bug = Error::from(sqlx::Error::Decode("bad".into())).into_problem();
        assert_eq!(bug.http_status(), 500);
        assert!(!bug.unavailable);
    }

    #[test]
    fn a_cause_quoted_inside_its_wrapper_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("role \"x\" does not exist at line 7")]
        struct Inner;
        #[derive(Debug, thiserror::Error)]
        #[error("error returned from database: {0}")]
        struct Middle(#[source] Inner);
        #[derive(Debug, thiserror::Error)]
        #[error("database: {0}")]
        struct Outer(#[source] Middle);
        let text = chain(&Outer(Middle(Inner)));
        assert_eq!(text, "database: error returned from database: role \"x\" does not exist at line 7");
    }

    #[test]
    fn the_chain_names_every_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
        let error = Error::from(sqlx::Error::Io(io));
        let text = chain(&error);
        assert!(text.contains("connection reset by peer"), "{text}");
        assert_eq!(text.matches("connection reset by peer").count(), 1, "{text}");
    }
}
