//! Pooled connections kept warm between requests.
//!
//! sqlx checks every connection handed back to its pool with a round trip:
//! dropping a `PoolConnection` spawns a task that pings PostgreSQL before the
//! connection is idle again. That is a task, two system calls and a wake-up
//! of a PostgreSQL backend per request, for a connection whose last step has
//! just finished; on a 2-core machine it cost a bare single-row SELECT
//! handler about a fifth of its throughput.
//!
//! A request whose steps all finished (its transaction committed or rolled
//! back, every reply read) hands its connection to [`Warm`] instead, and the
//! next request takes the most recently kept one. What stays as it was:
//!
//! - A connection goes from request to request only within `fresh`
//!   ([`FRESH`] by default, at most the pool's own
//!   [`CHECK_AFTER_IDLE`](super::CHECK_AFTER_IDLE)) of when it came from
//!   sqlx, whether or not the requests used it; then it goes back, and sqlx
//!   pings it, and checks it again before handing it out after a second
//!   idle. A task hands back whatever is older than that, every `fresh`. A
//!   connection lost meanwhile is retried on a fresh one, as one from the
//!   pool was (see `Session`). The pool still sees every connection a few
//!   times a second, so its own checks (its `max_lifetime`) still apply.
//! - A request cut off mid-step (its future dropped), or whose call failed,
//!   never hands its connection here: sqlx's ping flushes whatever that step
//!   left unread, and closes a broken connection.
//! - At most a quarter of the pool (and [`MAX_KEPT`]) is kept, and nothing
//!   while every connection of the pool is out (someone may be waiting for
//!   one): such a connection goes back to the pool's queue.
//! - A closed pool gets its connections back at once, and so does sqlx when
//!   the `Warm` is dropped.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};

/// How long after it came from sqlx a connection may go from request to
/// request, by default.
pub const FRESH: Duration = Duration::from_millis(100);
/// Connections kept at most, whatever the pool's size.
pub const MAX_KEPT: usize = 8;

/// Connections kept warm for the next request (see the module documentation).
pub struct Warm {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    capacity: usize,
    fresh: Duration,
    /// Kept at the end, taken from the end.
    kept: Mutex<Vec<Warmed>>,
}

/// A connection handed out by [`Warm`]: a pooled connection, and when it
/// last came from sqlx.
pub struct Warmed {
    conn: PoolConnection<Postgres>,
    since: Instant,
}

impl Warmed {
    /// A connection just taken from sqlx.
    pub fn new(conn: PoolConnection<Postgres>) -> Self {
        Self { conn, since: Instant::now() }
    }

    /// The pooled connection, for what only it can do (closing it).
    pub fn into_inner(self) -> PoolConnection<Postgres> {
        self.conn
    }
}

impl std::ops::Deref for Warmed {
    type Target = sqlx::PgConnection;

    fn deref(&self) -> &sqlx::PgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for Warmed {
    fn deref_mut(&mut self) -> &mut sqlx::PgConnection {
        &mut self.conn
    }
}

impl Warm {
    /// Keeps up to a quarter of `pool`'s connections, each within `fresh`
    /// (at most [`CHECK_AFTER_IDLE`](super::CHECK_AFTER_IDLE)) of when it came
    /// from sqlx; none when it is zero, or outside a Tokio runtime, where
    /// nothing could hand stale ones back.
    pub fn new(pool: PgPool, fresh: Duration) -> Self {
        let quarter = usize::try_from(pool.options().get_max_connections() / 4).unwrap_or(MAX_KEPT);
        let capacity = if fresh.is_zero() { 0 } else { quarter.min(MAX_KEPT) };
        Self::with_capacity(pool, capacity, fresh.min(super::CHECK_AFTER_IDLE))
    }

    /// Keeps up to `capacity` connections (0: none, every connection goes
    /// back to sqlx), each within `fresh` of when it came from sqlx.
    pub fn with_capacity(pool: PgPool, capacity: usize, fresh: Duration) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let capacity = if runtime.is_some() { capacity } else { 0 };
        let inner = Arc::new(Inner { pool, capacity, fresh, kept: Mutex::default() });
        if let (Some(runtime), true) = (runtime, capacity > 0) {
            runtime.spawn(hand_back_stale(Arc::downgrade(&inner)));
        }
        Self { inner }
    }

    /// The most recently kept connection that is still fresh, else one from
    /// the pool.
    pub async fn acquire(&self) -> sqlx::Result<Warmed> {
        match self.inner.take() {
            Some(conn) => Ok(conn),
            // Boxed (`runtime::connection`): unboxed, a request's futures
            // each copied sqlx's 8.6 kB acquire future as they were moved
            // (callgrind: about 40,000 instructions of copies per MCP call).
            None => Ok(Warmed::new(super::connection(&self.inner.pool).await?)),
        }
    }

    /// Keeps `conn` for the next request, unless it is no longer fresh or
    /// the pool has none left (then it goes back to the pool's queue). Only
    /// for a connection whose every step finished: nothing of it is checked
    /// here.
    pub fn keep(&self, conn: Warmed) {
        let inner = &self.inner;
        let pool = &inner.pool;
        let exhausted = pool.size() >= pool.options().get_max_connections() && pool.num_idle() == 0;
        if exhausted || !inner.is_fresh(&conn) {
            return;
        }
        let mut kept = inner.lock();
        // Looked at under the lock: the hand-back on closing takes it after
        // the pool is marked closed, so nothing is kept past it.
        if kept.len() < inner.capacity && !pool.is_closed() {
            kept.push(conn);
        }
    }

    /// Connections kept right now (idle, though the pool counts them in use).
    pub fn kept(&self) -> usize {
        self.inner.lock().len()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Vec<Warmed>> {
        // A panic while holding the lock leaves a plain list: still usable.
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_fresh(&self, conn: &Warmed) -> bool {
        conn.since.elapsed() < self.fresh
    }

    /// The most recently kept connection that is still fresh; the stale ones
    /// on the way go back to sqlx.
    fn take(&self) -> Option<Warmed> {
        let mut stale = Vec::new();
        let mut kept = self.lock();
        let fresh = loop {
            match kept.pop() {
                Some(conn) if self.is_fresh(&conn) => break Some(conn),
                Some(conn) => stale.push(conn),
                None => break None,
            }
        };
        drop(kept);
        drop(stale);
        fresh
    }

    /// Hands back to sqlx what is no longer fresh (everything once the pool
    /// is closed).
    fn hand_back_stale(&self) {
        let mut kept = self.lock();
        let stale: Vec<Warmed> = if self.pool.is_closed() {
            std::mem::take(&mut *kept)
        } else {
            let (fresh, stale) = std::mem::take(&mut *kept).into_iter().partition(|conn| self.is_fresh(conn));
            *kept = fresh;
            stale
        };
        drop(kept);
        drop(stale);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let kept = std::mem::take(self.kept.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
        if tokio::runtime::Handle::try_current().is_err() {
            // sqlx hands a connection back from a task it spawns, which needs
            // a runtime: without one, close them here.
            for conn in kept {
                drop(conn.conn.detach());
            }
        }
    }
}

/// Every `fresh`, hands back the stale connections, until the `Warm` is
/// dropped; everything at once when the pool closes.
async fn hand_back_stale(inner: Weak<Inner>) {
    let Some((fresh, closed)) = inner.upgrade().map(|inner| (inner.fresh, inner.pool.close_event())) else {
        return;
    };
    let mut closed = std::pin::pin!(closed);
    // The first look a period from now: a connection taken after this starts
    // is fresh until then.
    let period = fresh.max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let closing = tokio::select! {
            _ = ticks.tick() => false,
            () = &mut closed => true,
        };
        let Some(inner) = inner.upgrade() else { return };
        inner.hand_back_stale();
        if closing {
            return;
        }
    }
}
