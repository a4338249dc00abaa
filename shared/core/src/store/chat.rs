//! Public Chat state and Widget configurations: at most one row of each per
//! Agent, written on first change. Every read joins the live Agent, so the rows
//! of a deleted Agent (removed with it anyway) can never be read.

use sqlx::PgConnection;
use sqlx::types::Json;
use svc_contract::chat::WidgetConfiguration;
use svc_contract::patch::Patch;

use super::agents::AgentRow;
use super::types::{StoredLanguage, StoredWorkspaceStatus};
use crate::entitlements::Entitlement;
use crate::ids::{AgentId, WorkspaceId};

/// A live Agent of a Workspace with its stored chat state (`None` where
/// nothing was written yet).
#[derive(Clone, Debug)]
pub struct ChatRow {
    pub agent_id: AgentId,
    pub agent_name: String,
    pub agent_slug: String,
    pub default_language: StoredLanguage,
    pub enabled: Option<bool>,
    pub website: Option<String>,
    pub configuration: Option<Json<WidgetConfiguration>>,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId, agent: AgentId) -> sqlx::Result<Option<ChatRow>> {
    sqlx::query_as!(
        ChatRow,
        r#"
        SELECT a.id AS "agent_id: AgentId", a.name AS agent_name, a.slug AS agent_slug,
               a.default_language AS "default_language: StoredLanguage",
               p.enabled AS "enabled?", p.website AS "website?",
               w.configuration AS "configuration?: Json<WidgetConfiguration>"
        FROM agents a
        LEFT JOIN public_chats p ON p.agent_id = a.id
        LEFT JOIN widget_configurations w ON w.agent_id = a.id
        WHERE a.id = $1 AND a.workspace_id = $2 AND a.deleted_at IS NULL
        "#,
        agent as AgentId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await
}

/// A live Agent found by id alone, with its Workspace's status and
/// Entitlement and its stored chat state.
#[derive(Clone, Debug)]
pub struct PublicRow {
    pub agent: AgentRow,
    pub workspace_status: StoredWorkspaceStatus,
    pub entitlement: Entitlement,
    pub enabled: Option<bool>,
    pub website: Option<String>,
    pub configuration: Option<Json<WidgetConfiguration>>,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn find_public(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Option<PublicRow>> {
    let row = sqlx::query!(
        r#"
        SELECT a.id AS "id: AgentId", a.workspace_id AS "workspace_id: WorkspaceId", a.name, a.slug,
               a.default_language AS "default_language: StoredLanguage", a.instructions, a.temperature,
               ws.status AS "status: StoredWorkspaceStatus", ws.plan, ws.trial_end, ws.period_end,
               ws.cancel_at_period_end, ws.limit_overrides,
               p.enabled AS "enabled?", p.website AS "website?",
               w.configuration AS "configuration?: Json<WidgetConfiguration>"
        FROM agents a
        JOIN workspaces ws ON ws.id = a.workspace_id
        LEFT JOIN public_chats p ON p.agent_id = a.id
        LEFT JOIN widget_configurations w ON w.agent_id = a.id
        WHERE a.id = $1 AND a.deleted_at IS NULL
        "#,
        agent as AgentId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| PublicRow {
        entitlement: Entitlement::from_row(
            &r.plan,
            r.trial_end,
            r.period_end,
            r.cancel_at_period_end,
            &r.limit_overrides,
        ),
        agent: AgentRow {
            id: r.id,
            workspace_id: r.workspace_id,
            name: r.name,
            slug: r.slug,
            default_language: r.default_language,
            instructions: r.instructions,
            temperature: r.temperature,
        },
        workspace_status: r.status,
        enabled: r.enabled,
        website: r.website,
        configuration: r.configuration,
    }))
}

/// Public Chat state as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicChatRow {
    pub enabled: bool,
    pub website: Option<String>,
}

/// Sets whether the Agent's Public Chat is enabled, and its website as the
/// patch says (kept, cleared or set). The caller holds the Agent.
#[tracing::instrument(level = "debug", skip(conn, website))]
pub async fn set_public_chat(
    conn: &mut PgConnection,
    agent: AgentId,
    enabled: bool,
    website: &Patch<String>,
) -> sqlx::Result<PublicChatRow> {
    let (keep, value) = match website {
        Patch::Keep => (true, None),
        Patch::Clear => (false, None),
        Patch::Set(url) => (false, Some(url.as_str())),
    };
    sqlx::query_as!(
        PublicChatRow,
        r#"
        INSERT INTO public_chats (agent_id, enabled, website) VALUES ($1, $2, $4)
        ON CONFLICT (agent_id) DO UPDATE
        SET enabled = EXCLUDED.enabled,
            website = CASE WHEN $3 THEN public_chats.website ELSE EXCLUDED.website END,
            updated_at = now()
        RETURNING enabled, website
        "#,
        agent as AgentId,
        enabled,
        keep,
        value,
    )
    .fetch_one(conn)
    .await
}

/// The stored Widget configuration of an Agent, if one was written.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn widget_configuration(
    conn: &mut PgConnection,
    agent: AgentId,
) -> sqlx::Result<Option<WidgetConfiguration>> {
    let stored = sqlx::query_scalar!(
        r#"SELECT configuration AS "configuration: Json<WidgetConfiguration>"
           FROM widget_configurations WHERE agent_id = $1"#,
        agent as AgentId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(stored.map(|c| c.0))
}

/// Stores an Agent's whole Widget configuration. The caller holds the Agent
/// exclusively (it read the configuration it merged into under that lock).
#[tracing::instrument(level = "debug", skip(conn, configuration))]
pub async fn save_widget_configuration(
    conn: &mut PgConnection,
    agent: AgentId,
    configuration: &WidgetConfiguration,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO widget_configurations (agent_id, configuration) VALUES ($1, $2)
        ON CONFLICT (agent_id) DO UPDATE SET configuration = EXCLUDED.configuration, updated_at = now()
        "#,
        agent as AgentId,
        Json(configuration) as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes an Agent's chat state (the Agent is being deleted).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn forget(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM public_chats WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM widget_configurations WHERE agent_id = $1", agent as AgentId).execute(conn).await?;
    Ok(())
}
