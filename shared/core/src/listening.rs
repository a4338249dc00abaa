//! One connection per API process hears PostgreSQL's notifications for both
//! caches kept in step with it: `knowledge_source.wait`'s answers
//! ([`WaitCache`]) and authenticated callers ([`CallerCache`]).
//!
//! A listening connection cut off without a word (a partition, a lost host)
//! would wait forever, the caches believing they still hear every change.
//! So every process sends a heartbeat notification every [`HEARTBEAT`], and a
//! listener that hears nothing, not even a heartbeat, for [`SILENCE`] counts
//! itself deaf and connects again.

use std::time::{Duration, Instant};

use crate::auth::callers::{self, CallerCache};
use crate::knowledge::waits::{self, WaitCache};

/// The heartbeats' channel.
const HEARTBEAT_CHANNEL: &str = "svc_heartbeat";
/// How often each process sends a heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// How long a listener may hear nothing before it connects again.
pub const SILENCE: Duration = Duration::from_secs(6);

/// Keeps the caches that are on in step with PostgreSQL until `pool` closes:
/// listens over a connection of its own and, after a lost connection, starts
/// again with backoff, keeping nothing meanwhile.
pub async fn follow(pool: &sqlx::PgPool, waits: &WaitCache, callers: &CallerCache) {
    let mut channels = Vec::new();
    if !waits.is_off() {
        channels.push(waits::CHANNEL);
    }
    if !callers.is_off() {
        channels.push(callers::CHANNEL);
    }
    if channels.is_empty() {
        return std::future::pending().await;
    }
    channels.push(HEARTBEAT_CHANNEL);
    /// However this ends (the pool closed, or the task dropped at shutdown),
    /// nothing kept is used afterwards.
    struct Deaf<'a>(&'a WaitCache, &'a CallerCache);
    impl Drop for Deaf<'_> {
        fn drop(&mut self) {
            self.0.deaf();
            self.1.deaf();
        }
    }
    let deaf = Deaf(waits, callers);
    let own = crate::store::knowledge::listener_pool(pool);
    // Until the pool closes (a test's database is dropped then, which waits
    // for every connection to it, this one included).
    let listening = async { tokio::join!(listen(&own, &channels, waits, callers), heartbeat(pool)) };
    let _closed = pool.close_event().do_until(listening).await;
    drop(deaf);
    own.close().await;
}

async fn listen(own: &sqlx::PgPool, channels: &[&str], waits: &WaitCache, callers: &CallerCache) {
    use backon::{ExponentialBuilder, Retryable};
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .without_max_times();
    loop {
        let listened = (|| crate::store::knowledge::listen(own, channels))
            .retry(backoff)
            .notify(|error, delay| tracing::warn!(%error, ?delay, "cannot listen for changes; retrying"))
            .await;
        let Ok(mut listener) = listened else { continue };
        let started = Instant::now();
        waits.listening();
        callers.listening();
        let error = loop {
            // Dropped mid-wait on silence, with the listener: it is not reused.
            match tokio::time::timeout(SILENCE, listener.try_recv()).await {
                Ok(Ok(Some(notification))) => match notification.channel() {
                    waits::CHANNEL => waits.changed(notification.payload()),
                    callers::CHANNEL => callers.changed(),
                    _ => {}
                },
                Ok(Ok(None)) => break "the connection was lost".to_owned(),
                Ok(Err(error)) => break error.to_string(),
                Err(_) => break format!("nothing heard for {SILENCE:?}, not even a heartbeat"),
            }
        };
        waits.deaf();
        callers.deaf();
        drop(listener);
        tracing::warn!(error, "stopped hearing changes; listening again");
        // A connection that keeps dropping at once is not retried in a tight loop.
        if started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Sends a heartbeat on [`HEARTBEAT_CHANNEL`] every [`HEARTBEAT`], forever: what
/// every listener (this process's and the others') expects to hear.
async fn heartbeat(pool: &sqlx::PgPool) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let sent = tokio::time::timeout(HEARTBEAT, crate::store::knowledge::heartbeat(pool, HEARTBEAT_CHANNEL)).await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::debug!("could not send a heartbeat notification");
        }
    }
}
