//! Users, identified by their identity provider's (issuer, subject).

use sqlx::PgConnection;
use time::OffsetDateTime;

use crate::ids::UserId;

#[derive(Clone, Debug, PartialEq)]
pub struct UserRow {
    pub id: UserId,
    pub issuer: String,
    pub subject: String,
    pub email: String,
    pub name: Option<String>,
    pub setup_completed_at: Option<OffsetDateTime>,
    pub sessions_revoked_at: Option<OffsetDateTime>,
}

/// Creates the User, or updates its e-mail and name, and marks setup completed.
#[tracing::instrument(level = "debug", skip(conn, email, name))]
pub async fn complete_setup(
    conn: &mut PgConnection,
    issuer: &str,
    subject: &str,
    email: &str,
    name: Option<&str>,
) -> sqlx::Result<UserRow> {
    sqlx::query_as!(
        UserRow,
        r#"
        INSERT INTO users (id, issuer, subject, email, name, setup_completed_at)
        VALUES ($1, $2, $3, $4, $5, now())
        ON CONFLICT (issuer, subject) DO UPDATE
            SET email = EXCLUDED.email,
                name = EXCLUDED.name,
                setup_completed_at = COALESCE(users.setup_completed_at, now())
        RETURNING id AS "id: UserId", issuer, subject, email, name, setup_completed_at, sessions_revoked_at
        "#,
        UserId::new() as UserId,
        issuer,
        subject,
        email,
        name,
    )
    .fetch_one(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn find_by_identity(conn: &mut PgConnection, issuer: &str, subject: &str) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(
        UserRow,
        r#"
        SELECT id AS "id: UserId", issuer, subject, email, name, setup_completed_at, sessions_revoked_at
        FROM users WHERE issuer = $1 AND subject = $2
        "#,
        issuer,
        subject,
    )
    .fetch_optional(conn)
    .await
}

/// Revokes every session issued up to now; returns the User, if any.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn revoke_sessions(conn: &mut PgConnection, issuer: &str, subject: &str) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(
        UserRow,
        r#"
        UPDATE users SET sessions_revoked_at = now()
        WHERE issuer = $1 AND subject = $2
        RETURNING id AS "id: UserId", issuer, subject, email, name, setup_completed_at, sessions_revoked_at
        "#,
        issuer,
        subject,
    )
    .fetch_optional(conn)
    .await
}
