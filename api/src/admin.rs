//! `svc-api admin ...`: operator commands against the same database.

use serde_json::Value;
use sqlx::PgPool;
use svc_core::admin;

#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// Creates a User (or updates it) and marks first-time setup completed.
    UserSetup {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: Option<String>,
    },
    /// Voids every access token the User holds now.
    UserRevokeSessions {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        subject: String,
    },
    /// Adds a User to a Workspace, or changes their role.
    MemberAdd {
        /// Workspace id or slug.
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        subject: String,
        /// owner, admin or member.
        #[arg(long)]
        role: String,
    },
    /// Sets a Workspace's plan (trial, starter, pro or expired) and limit overrides.
    PlanSet {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        plan: String,
        /// KEY=N, repeatable: agents, api_keys, knowledge_sources, knowledge_bytes, conversations.
        #[arg(long = "limit")]
        limits: Vec<String>,
    },
    /// Archives a Workspace: mutations and public answers stop.
    WorkspaceArchive {
        #[arg(long)]
        workspace: String,
    },
    /// Makes an archived Workspace active again.
    WorkspaceUnarchive {
        #[arg(long)]
        workspace: String,
    },
}

/// Runs one command; its result is the JSON object to print.
pub async fn run(pool: &PgPool, command: AdminCommand) -> Result<Value, admin::AdminError> {
    match command {
        AdminCommand::UserSetup { issuer, subject, email, name } => {
            admin::user_setup(pool, &issuer, &subject, &email, name.as_deref()).await
        }
        AdminCommand::UserRevokeSessions { issuer, subject } => {
            admin::user_revoke_sessions(pool, &issuer, &subject).await
        }
        AdminCommand::MemberAdd { workspace, issuer, subject, role } => {
            admin::member_add(pool, &workspace, &issuer, &subject, &role).await
        }
        AdminCommand::PlanSet { workspace, plan, limits } => admin::plan_set(pool, &workspace, &plan, &limits).await,
        AdminCommand::WorkspaceArchive { workspace } => admin::set_archived(pool, &workspace, true).await,
        AdminCommand::WorkspaceUnarchive { workspace } => admin::set_archived(pool, &workspace, false).await,
    }
}
