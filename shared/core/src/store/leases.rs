//! Leases of work one process at a time does across all replicas (the
//! sweeper), held in rows (migration 0029) rather than by a session: a holder
//! cut off from PostgreSQL loses its lease when it runs out, even while its
//! session looks alive to PostgreSQL.

use sqlx::PgConnection;

/// Takes the lease `name` for `holder` when it is free, run out, or already
/// `holder`'s, for `secs`; `false` when another holder has it.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn take(conn: &mut PgConnection, name: &str, holder: &str, secs: f64) -> sqlx::Result<bool> {
    let taken = sqlx::query!(
        r#"
        INSERT INTO singleton_leases AS l (name, holder, expires_at)
        VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
        ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
        WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder
        "#,
        name,
        holder,
        secs,
    )
    .execute(conn)
    .await?;
    Ok(taken.rows_affected() == 1)
}

/// Extends `holder`'s lease by `secs` from now; `false` when it holds it no
/// longer (it ran out and another took it).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn renew(conn: &mut PgConnection, name: &str, holder: &str, secs: f64) -> sqlx::Result<bool> {
    let renewed = sqlx::query!(
        r#"
        UPDATE singleton_leases SET expires_at = clock_timestamp() + make_interval(secs => $3)
        WHERE name = $1 AND holder = $2
        "#,
        name,
        holder,
        secs,
    )
    .execute(conn)
    .await?;
    Ok(renewed.rows_affected() == 1)
}

/// Gives `holder`'s lease up, so the next holder need not wait for it to run out.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn release(conn: &mut PgConnection, name: &str, holder: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE singleton_leases SET expires_at = clock_timestamp() WHERE name = $1 AND holder = $2",
        name,
        holder,
    )
    .execute(conn)
    .await?;
    Ok(())
}
