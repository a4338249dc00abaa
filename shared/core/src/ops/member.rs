//! The web application's membership operations (`svc_contract::catalog::ACCOUNT`):
//! member.list, .invite, .set_role, .remove, invite.list, .accept. The call
//! path has checked the least role; the rules only membership knows are
//! `crate::account`'s.

use serde_json::Value;
use sqlx::PgConnection;
use svc_contract::operations::member::{
    AcceptInput, AcceptOutput, Invite, InviteInput, InviteOutput, InvitesInput, InvitesOutput, ListInput, ListOutput,
    Member, MemberOutput, RemoveInput, RemovedOutput, SetRoleInput,
};
use svc_contract::schema::True;
use svc_contract::{Problem, Role};

use super::{Ctx, Done, Handler};
use crate::account;
use crate::error::Result;
use crate::ids::UserId;
use crate::store;
use crate::timestamp::millis;

/// The member an input names; an id that cannot be one names nobody.
fn member_id(text: &str) -> Result<UserId> {
    UserId::parse(text).ok_or_else(|| Problem::not_found("member").into())
}

pub(crate) struct List;

impl Handler for List {
    type Input = ListInput;
    type Output = ListOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, _: ListInput) -> Result<Done<ListOutput>> {
        let rows = store::members::list(conn, ctx.workspace()?.id).await?;
        let members = rows
            .into_iter()
            .map(|m| Member { user_id: m.user_id.to_string(), email: m.email, name: m.name, role: m.role.into() })
            .collect();
        Ok(ListOutput { members }.into())
    }
}

pub(crate) struct Invites;

impl Handler for Invites {
    type Input = InvitesInput;
    type Output = InvitesOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, _: InvitesInput) -> Result<Done<InvitesOutput>> {
        let rows = store::invites::list_open(conn, ctx.workspace()?.id).await?;
        let invites =
            rows.into_iter().map(|i| Invite { role: i.role.into(), expires_at: millis(i.expires_at) }).collect();
        Ok(InvitesOutput { invites }.into())
    }
}

pub(crate) struct MakeInvite;

impl Handler for MakeInvite {
    type Input = InviteInput;
    type Output = InviteOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: InviteInput) -> Result<Done<InviteOutput>> {
        let ws = ctx.workspace()?;
        let by = (ctx.user_id()?, ws.role.unwrap_or(Role::Member));
        let created = account::invite(conn, ws.id, by, input.role).await?;
        let invite = Invite { role: input.role, expires_at: millis(created.expires_at) };
        Ok(InviteOutput { invite, token: Some(created.token) }.into())
    }

    /// The code is shown once: a replay answers without it.
    fn for_replay(mut data: Value) -> Value {
        if let Some(token) = data.get_mut("token") {
            *token = Value::Null;
        }
        data
    }
}

pub(crate) struct SetRole;

impl Handler for SetRole {
    type Input = SetRoleInput;
    type Output = MemberOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: SetRoleInput) -> Result<Done<MemberOutput>> {
        let target = member_id(&input.user_id)?;
        account::change_role(conn, ctx.workspace()?.id, ctx.user_id()?, target, input.role).await?;
        Ok(MemberOutput { user_id: target.to_string(), role: input.role }.into())
    }
}

pub(crate) struct Remove;

impl Handler for Remove {
    type Input = RemoveInput;
    type Output = RemovedOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: RemoveInput) -> Result<Done<RemovedOutput>> {
        let target = member_id(&input.user_id)?;
        account::remove_member(conn, ctx.workspace()?.id, ctx.user_id()?, target).await?;
        Ok(RemovedOutput { user_id: target.to_string(), removed: True }.into())
    }
}

pub(crate) struct Accept;

impl Handler for Accept {
    type Input = AcceptInput;
    type Output = AcceptOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: AcceptInput) -> Result<Done<AcceptOutput>> {
        let invite = account::accept_invite(conn, ctx.user_id()?, &input.token).await?;
        Ok(AcceptOutput { workspace_id: invite.workspace_id.to_string(), role: invite.role.into() }.into())
    }
}
