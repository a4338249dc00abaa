//! workspace.list, .inspect, .create, .rename, .entitlements.inspect

use sqlx::PgConnection;
use svc_contract::operations::workspace::{
    CreateInput, EntitlementsInspectInput, EntitlementsInspectOutput, InspectInput, ListInput, ListOutput, RenameInput,
    WorkspaceOutput,
};
use svc_contract::resources;

use super::{Ctx, Done, Handler, Page};
use crate::entitlements::TRIAL_LENGTH;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::store::types::StoredRole;
use crate::store::workspaces::{NewWorkspace, WorkspaceRow};
use crate::timestamp::millis;
use crate::{cursor, slug, store};

fn resource(row: WorkspaceRow) -> resources::Workspace {
    resources::Workspace {
        id: row.id.to_string(),
        name: row.name,
        slug: row.slug,
        role: row.role.map(Into::into),
        status: row.status.into(),
    }
}

pub(crate) struct List;

impl Handler for List {
    type Input = ListInput;
    type Output = Page<ListOutput>;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ListInput) -> Result<Done<Self::Output>> {
        let after = input.cursor.as_deref().map(|c| cursor::decode("workspaces", c)).transpose()?;
        let rows =
            store::workspaces::list_for_user(conn, ctx.user_id()?, after, i64::from(input.page_size) + 1).await?;
        let (rows, next_cursor) = cursor::page(rows, input.page_size, "workspaces", |row| row.id.0);
        Ok(Page { data: ListOutput { workspaces: rows.into_iter().map(resource).collect() }, next_cursor }.into())
    }
}

pub(crate) struct Inspect;

impl Handler for Inspect {
    type Input = InspectInput;
    type Output = WorkspaceOutput;

    async fn handle(ctx: &Ctx<'_>, _conn: &mut PgConnection, _input: InspectInput) -> Result<Done<WorkspaceOutput>> {
        Ok(WorkspaceOutput { workspace: ctx.workspace()?.resource() }.into())
    }
}

pub(crate) struct Create;

impl Handler for Create {
    type Input = CreateInput;
    type Output = WorkspaceOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: CreateInput) -> Result<Done<WorkspaceOutput>> {
        let owner = ctx.user_id()?;
        let new = NewWorkspace { id: WorkspaceId::new(), name: &input.name, trial_end: ctx.now + TRIAL_LENGTH };
        let row = match &input.slug {
            Some(slug) => store::workspaces::insert(conn, new.id, new.name, slug, new.trial_end)
                .await?
                .ok_or_else(|| slug_taken(slug))?,
            None => store::insert_with_free_slug(conn, &new, &slug::derive(&input.name, "workspace")).await?,
        };
        store::usage::create(conn, row.id).await?;
        store::workspaces::set_member(conn, row.id, owner, StoredRole::Owner).await?;
        Ok(WorkspaceOutput { workspace: resource(WorkspaceRow { role: Some(StoredRole::Owner), ..row }) }.into())
    }
}

fn slug_taken(slug: &str) -> svc_contract::Problem {
    svc_contract::Problem::invalid("slug_taken", format!("The slug `{slug}` is already taken."))
        .with_detail("slug", slug)
}

pub(crate) struct Rename;

impl Handler for Rename {
    type Input = RenameInput;
    type Output = WorkspaceOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: RenameInput) -> Result<Done<WorkspaceOutput>> {
        let ws = ctx.workspace()?;
        let row = store::workspaces::rename(conn, ws.id, &input.name).await?;
        Ok(WorkspaceOutput { workspace: resource(WorkspaceRow { role: ws.role.map(Into::into), ..row }) }.into())
    }
}

pub(crate) struct EntitlementsInspect;

impl Handler for EntitlementsInspect {
    type Input = EntitlementsInspectInput;
    type Output = EntitlementsInspectOutput;

    async fn handle(
        ctx: &Ctx<'_>,
        conn: &mut PgConnection,
        _input: EntitlementsInspectInput,
    ) -> Result<Done<Self::Output>> {
        let ws = ctx.workspace()?;
        let e = &ws.entitlement;
        let usage = store::usage::get(conn, ws.id).await?.to_map();
        Ok(EntitlementsInspectOutput {
            entitlement: resources::Entitlement {
                workspace_id: ws.id.to_string(),
                plan: Some(e.plan.as_str().to_owned()),
                plan_name: Some(e.plan.display_name().to_owned()),
                status: e.status(ctx.now).to_owned(),
                active: e.is_active(ctx.now),
                features: e.features(),
                limits: e.limits(),
                usage,
                channels: e.channels(),
                trial_end: e.trial_end.map(millis),
                period_end: e.period_end.map(millis),
                cancel_at_period_end: e.cancel_at_period_end,
            },
        }
        .into())
    }
}
