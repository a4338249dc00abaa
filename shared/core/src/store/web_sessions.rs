//! The web application's browser sessions and sign-ins under way. Only the
//! SHA-256 of each cookie value is stored.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq)]
pub struct WebSessionRow {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub email: String,
    pub name: Option<String>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

pub struct NewWebSession<'a> {
    pub token_hash: &'a [u8],
    pub issuer: &'a str,
    pub subject: &'a str,
    pub email: &'a str,
    pub name: Option<&'a str>,
    pub expires_at: OffsetDateTime,
}

/// Stores a session (and drops sessions that have expired: they can never be
/// used again, so keeping them only grows the table).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn insert(conn: &mut PgConnection, session: &NewWebSession<'_>) -> sqlx::Result<WebSessionRow> {
    sqlx::query!("DELETE FROM web_sessions WHERE expires_at < now()").execute(&mut *conn).await?;
    sqlx::query_as!(
        WebSessionRow,
        r#"
        INSERT INTO web_sessions (id, token_hash, issuer, subject, email, name, expires_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        RETURNING id, issuer, subject, email, name, created_at, expires_at
        "#,
        Uuid::now_v7(),
        session.token_hash,
        session.issuer,
        session.subject,
        session.email,
        session.name,
        session.expires_at,
    )
    .fetch_one(conn)
    .await
}

/// The unexpired session whose token hashes to `token_hash`, unless its User's
/// sessions were revoked after it began (`svc-api admin user-revoke-sessions`
/// ends web sessions as it ends tokens). Once the User is set up, its `name`
/// and `email` are the ones setup recorded, not the provider's.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn find(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<Option<WebSessionRow>> {
    sqlx::query_as!(
        WebSessionRow,
        r#"
        SELECT s.id, s.issuer, s.subject, COALESCE(u.email, s.email) AS "email!",
               COALESCE(u.name, s.name) AS name, s.created_at, s.expires_at
        FROM web_sessions s
        LEFT JOIN users u ON u.issuer = s.issuer AND u.subject = s.subject
        WHERE s.token_hash = $1 AND s.expires_at > now()
          AND (u.sessions_revoked_at IS NULL OR s.created_at > u.sessions_revoked_at)
        "#,
        token_hash,
    )
    .fetch_optional(conn)
    .await
}

/// Ends a session (sign-out).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn delete(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM web_sessions WHERE token_hash = $1", token_hash).execute(conn).await?;
    Ok(())
}

/// A sign-in under way, as the callback needs it again.
#[derive(Clone, Debug, PartialEq)]
pub struct SignInRow {
    pub state: String,
    pub verifier: String,
    pub nonce: String,
}

/// Records a sign-in under way (and drops those that have expired).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn insert_sign_in(
    conn: &mut PgConnection,
    binding_hash: &[u8],
    sign_in: &SignInRow,
    expires_at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM web_sign_ins WHERE expires_at < now()").execute(&mut *conn).await?;
    sqlx::query!(
        "INSERT INTO web_sign_ins (binding_hash, state, verifier, nonce, expires_at) VALUES ($1, $2, $3, $4, $5)",
        binding_hash,
        sign_in.state,
        sign_in.verifier,
        sign_in.nonce,
        expires_at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes the unexpired sign-in bound to `binding_hash`: it is spent by being
/// asked for, whatever follows, so a callback can be completed once only.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn take_sign_in(conn: &mut PgConnection, binding_hash: &[u8]) -> sqlx::Result<Option<SignInRow>> {
    sqlx::query!(
        r#"
        DELETE FROM web_sign_ins WHERE binding_hash = $1
        RETURNING state, verifier, nonce, expires_at > now() AS "fresh!"
        "#,
        binding_hash,
    )
    .fetch_optional(conn)
    .await
    .map(|row| row.filter(|r| r.fresh).map(|r| SignInRow { state: r.state, verifier: r.verifier, nonce: r.nonce }))
}
