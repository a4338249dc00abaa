//! What one call works with, below both the call path ([`crate::service`])
//! that starts it and the handlers that run it (`ops`): the parts of the
//! process every call shares ([`Shared`]), the call's pooled connection
//! ([`Connection`]), what its client declares ([`ClientHints`]) and what it
//! answers ([`Reply`]).

use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use svc_contract::identity::SecretLocation;

use crate::answers::{Engine, Llm, Meaning};
use crate::config::CoreConfig;
use crate::error::Error;
use crate::gates::Gates;
use crate::jobs::{Job, Queue};
use crate::knowledge::Backlog;
use crate::knowledge::waits::WaitCache;
use crate::runtime::warm::{Warm, Warmed};

/// What a client declares about itself (reported by `identity.status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHints {
    /// `Svc-Client-Version`.
    pub version: Option<String>,
    /// `Svc-Secret-Location`.
    pub secret_location: SecretLocation,
}

/// A successful call's result, before a surface renders it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub data: Value,
    pub next_cursor: Option<String>,
    /// The stored result of an earlier call with the same idempotency key.
    pub replayed: bool,
}

/// The parts of the process every call's handlers share: one per process.
pub struct Shared {
    pub(crate) pool: PgPool,
    /// Connections kept between requests (see [`crate::runtime::warm`]).
    pub(crate) warm: Warm,
    pub(crate) config: CoreConfig,
    pub(crate) gates: Gates,
    pub(crate) queue: Option<Queue>,
    pub(crate) llm: Option<Llm>,
    pub(crate) meaning: Option<Meaning>,
    backlog: Backlog,
    pub(crate) waits: WaitCache,
}

impl Shared {
    /// Over `pool`, enqueueing background jobs on `queue` (without one, jobs
    /// wait for the workers' sweeper); answers quoted, searched by words,
    /// until a model is given.
    pub(crate) fn new(pool: PgPool, queue: Option<Queue>, config: CoreConfig) -> Self {
        Self {
            warm: Warm::new(pool.clone(), config.warm),
            gates: Gates::new(config.gate_wait, config.workspace_writes, config.gated_writes),
            waits: WaitCache::new(config.wait_cache_entries, config.wait_cache_max_age),
            pool,
            config,
            queue,
            llm: None,
            meaning: None,
            backlog: Backlog::default(),
        }
    }

    /// What answers questions.
    pub(crate) fn engine(&self) -> Engine<'_> {
        Engine { pool: &self.pool, llm: self.llm.as_ref(), meaning: self.meaning.as_ref() }
    }

    /// Revisions still to be processed (read at most once a second). An
    /// error only if the connection was lost: the read is then retried on
    /// a live one, rather than its connection kept for the next request.
    pub(crate) async fn backlog(&self, conn: &mut PgConnection) -> crate::error::Result<i64> {
        Ok(self.backlog.get(conn).await?)
    }

    /// Hands committed work to the workers. A failure is logged, not answered:
    /// the work is in PostgreSQL, and the sweeper enqueues it again.
    pub(crate) async fn enqueue(&self, jobs: &[Job]) {
        let Some(queue) = &self.queue else { return };
        if let Err(error) = queue.send(jobs).await {
            tracing::warn!(%error, jobs = jobs.len(), "could not enqueue; the sweeper will");
        }
    }

    /// A call's connection, taken when first needed: see [`Connection`].
    pub(crate) fn connection(&self) -> Connection<'_> {
        Connection { shared: self, conn: None }
    }
}

/// One request's pooled connection. It is taken when first needed and kept,
/// so authentication and the call that follows share it;
/// [`Connection::release`] hands it back early (before a slow upload).
pub struct Connection<'a> {
    shared: &'a Shared,
    conn: Option<Warmed>,
}

impl Connection<'_> {
    pub(crate) async fn conn(&mut self) -> crate::error::Result<&mut PgConnection> {
        if self.conn.is_none() {
            self.conn = Some(self.shared.warm.acquire().await?);
        }
        match &mut self.conn {
            Some(conn) => Ok(&mut **conn),
            None => Err(Error::internal("no connection after acquiring one")),
        }
    }

    /// Hands the connection back between steps (every step so far finished);
    /// the next step takes one again. It is kept warm for the next request
    /// (see [`crate::runtime::warm`]).
    pub fn release(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.shared.warm.keep(conn);
        }
    }

    /// Closes the connection instead of returning it: its state is unknown.
    pub(crate) async fn discard(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.into_inner().close().await;
        }
    }

    /// Drops a connection found dead (never back into the pool) and takes a live
    /// one: the next step runs on a connection checked just now.
    async fn reconnect(&mut self) -> crate::error::Result<()> {
        if let Some(dead) = self.conn.take() {
            dead.into_inner().close_on_drop();
        }
        self.conn = Some(Warmed::new(crate::runtime::live_connection(&self.shared.pool).await?));
        Ok(())
    }

    /// Whether `error` means the connection went away, in which case the
    /// call has a live connection again and the step may run once more.
    pub(crate) async fn lost_and_reconnected(&mut self, error: &Error) -> bool {
        if error.fault() != crate::error::Fault::ConnectionLost {
            return false;
        }
        crate::faults::connection_lost();
        tracing::info!(error = %crate::error::chain(error), "database connection lost; retrying on a fresh one");
        crate::faults::retried(crate::faults::Retry::Request);
        self.reconnect().await.is_ok()
    }
}
