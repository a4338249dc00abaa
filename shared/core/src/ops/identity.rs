//! identity.status

use sqlx::PgConnection;
use svc_contract::identity::{
    AuthInfo, AuthMode, Availability, ClientInfo, CredentialInfo, IdentityStatus, Ready, UserInfo, WorkspaceInfo,
};
use svc_contract::operations::identity::StatusInput;

use super::{Ctx, Done, Handler};
use crate::caller::Principal;
use crate::error::Result;
use crate::timestamp::rfc3339;

pub(crate) struct Status;

impl Handler for Status {
    type Input = StatusInput;
    type Output = IdentityStatus;

    async fn handle(ctx: &Ctx<'_>, _conn: &mut PgConnection, _input: StatusInput) -> Result<Done<IdentityStatus>> {
        let (mode, expires_at, user, credential) = match &ctx.caller.principal {
            Principal::User(user) => (
                AuthMode::User,
                Some(rfc3339(user.expires_at)),
                Some(UserInfo { id: user.id.to_string(), email: user.email.clone(), name: user.name.clone() }),
                None,
            ),
            Principal::ApiKey(key) => (
                AuthMode::WorkspaceApiKey,
                None,
                None,
                Some(CredentialInfo { key_prefix: key.key_prefix.clone(), scopes: key.scopes.clone() }),
            ),
        };
        let workspace = ctx.workspace.map(|ws| WorkspaceInfo {
            id: ws.id.to_string(),
            name: Some(ws.name.clone()),
            slug: Some(ws.slug.clone()),
            role: ws.role,
            status: ws.status,
        });
        // MCP is a plan feature; the API itself always answers.
        let mcp = ctx.workspace.is_none_or(|ws| ws.entitlement.is_active(ctx.now));
        Ok(IdentityStatus {
            client: ClientInfo {
                version: ctx.client.version.clone().unwrap_or_else(|| "unknown".to_owned()),
                endpoint: ctx.shared.config.public_base_url.clone(),
            },
            auth: AuthInfo { mode, secret_location: ctx.client.secret_location, expires_at },
            user,
            workspace,
            credential,
            availability: Availability { api: true, mcp },
            status: Ready::Ready,
        }
        .into())
    }
}
