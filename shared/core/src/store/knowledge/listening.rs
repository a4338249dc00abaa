//! Hearing PostgreSQL's notifications (changes of sources and of callers).

/// A pool of one connection for listening (outside `pool`'s limit, and
/// without its idle and lifetime limits: the connection is held for good).
pub fn listener_pool(pool: &sqlx::PgPool) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with((*pool.connect_options()).clone())
}

/// Listens on `channels` over `own`'s connection (see [`listener_pool`]).
pub async fn listen(own: &sqlx::PgPool, channels: &[&str]) -> sqlx::Result<sqlx::postgres::PgListener> {
    let mut listener = sqlx::postgres::PgListener::connect_with(own).await?;
    // A lost connection ends this listener: the caller starts again, knowing
    // that notifications may have been missed meanwhile.
    listener.eager_reconnect(false);
    listener.listen_all(channels.iter().copied()).await?;
    Ok(listener)
}

/// Sends an empty notification on `channel` (a listener's heartbeat).
pub async fn heartbeat(pool: &sqlx::PgPool, channel: &str) -> sqlx::Result<()> {
    let mut conn = crate::runtime::connection(pool).await?;
    sqlx::query!("SELECT pg_notify($1, '')", channel).execute(&mut *conn).await?;
    Ok(())
}
