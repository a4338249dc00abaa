//! api_key.list, .create, .rotate, .revoke: Admins and Owners with a User session.

use serde_json::Value;
use sqlx::PgConnection;
use svc_contract::operations::api_key::{
    ApiKeyOutput, CreateInput, ListInput, ListOutput, RevokeInput, RotateInput, SecretOutput,
};
use svc_contract::{Preset, Problem, Scope, resources};

use super::{Ctx, Done, Handler, Lock, Page};
use crate::auth::api_key::{self, key_prefix};
use crate::entitlements::LimitKey;
use crate::error::{Error, Result};
use crate::ids::ApiKeyId;
use crate::store::api_keys::{ApiKeyRow, NewApiKey};
use crate::store::usage::Delta;
use crate::timestamp::millis;
use crate::{cursor, store};

impl From<ApiKeyRow> for resources::ApiKey {
    fn from(row: ApiKeyRow) -> Self {
        resources::ApiKey {
            id: row.id.to_string(),
            workspace_id: row.workspace_id.to_string(),
            name: row.name,
            key_prefix: key_prefix(&row.public_id),
            preset: row.preset.as_deref().and_then(Preset::parse),
            scopes: row.scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
            last_used_at: row.last_used_at.map(millis),
            created_at: millis(row.created_at),
            revoked_at: row.revoked_at.map(millis),
            rotated_from_id: row.rotated_from_id.map(|id| id.to_string()),
        }
    }
}

fn not_found() -> Problem {
    Problem::not_found("API key")
}

/// Locks a key of the selected Workspace; an id of another Workspace's key, or
/// one that cannot be an id, names nothing.
async fn lock_key(ctx: &Ctx<'_>, conn: &mut PgConnection, id: &str) -> Result<ApiKeyRow> {
    let id = ApiKeyId::parse(id).ok_or_else(not_found)?;
    Ok(store::api_keys::lock(conn, ctx.workspace()?.id, id).await?.ok_or_else(not_found)?)
}

/// Makes and stores a key with a fresh secret, within the `api_keys` limit
/// (reserved last: see `store::usage`).
async fn issue(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    name: &str,
    preset: Option<Preset>,
    scopes: &[String],
    rotated_from_id: Option<ApiKeyId>,
) -> Result<SecretOutput> {
    let ws = ctx.workspace()?;
    let created_by = ctx.user_id()?;
    for _ in 0..3 {
        let key = api_key::generate().map_err(|e| Error::internal(format!("no randomness: {e}")))?;
        let new = NewApiKey {
            id: ApiKeyId::new(),
            workspace_id: ws.id,
            name,
            public_id: &key.public_id,
            secret_hash: &key.hash,
            preset: preset.map(Preset::as_str),
            scopes,
            created_by,
            rotated_from_id,
        };
        if let Some(row) = store::api_keys::insert(conn, &new).await? {
            super::reserve(ctx, conn, &Delta::of(LimitKey::ApiKeys, 1)).await?;
            return Ok(SecretOutput { api_key: row.into(), secret: Some(key.secret), secret_returned: true });
        }
    }
    Err(Error::internal("three generated API key ids collided"))
}

/// What replays keep of a create or rotate: the key, never its secret.
fn without_secret(mut data: Value) -> Value {
    if let Value::Object(object) = &mut data {
        object.insert("secret".into(), Value::Null);
        object.insert("secretReturned".into(), Value::Bool(false));
    }
    data
}

pub(crate) struct List;

impl Handler for List {
    type Input = ListInput;
    type Output = Page<ListOutput>;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: ListInput) -> Result<Done<Self::Output>> {
        let after = input.cursor.as_deref().map(|c| cursor::decode("api_keys", c)).transpose()?;
        let rows = store::api_keys::list(conn, ctx.workspace()?.id, after, i64::from(input.page_size) + 1).await?;
        let (rows, next_cursor) = cursor::page(rows, input.page_size, "api_keys", |row| row.id.0);
        Ok(Page { data: ListOutput { api_keys: rows.into_iter().map(Into::into).collect() }, next_cursor }.into())
    }
}

pub(crate) struct Create;

impl Handler for Create {
    type Input = CreateInput;
    type Output = SecretOutput;

    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: CreateInput) -> Result<Done<SecretOutput>> {
        // The schema admits exactly one of the two.
        let mut scopes = match (input.preset, input.scopes) {
            (Some(preset), None) => preset.scopes(),
            (None, Some(scopes)) => scopes,
            _ => return Err(Problem::invalid("preset_or_scopes", "Give exactly one of `preset` or `scopes`.").into()),
        };
        scopes.sort();
        scopes.dedup();
        let scopes: Vec<String> = scopes.iter().map(|s| s.as_str().to_owned()).collect();
        Ok(issue(ctx, conn, &input.name, input.preset, &scopes, None).await?.into())
    }

    fn for_replay(data: Value) -> Value {
        without_secret(data)
    }
}

pub(crate) struct Rotate;

impl Handler for Rotate {
    type Input = RotateInput;
    type Output = SecretOutput;

    const LOCK: Lock = Lock::Limited;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: RotateInput) -> Result<Done<SecretOutput>> {
        let old = lock_key(ctx, conn, &input.api_key_id).await?;
        if old.revoked_at.is_some() {
            return Err(revoked().into());
        }
        let preset = old.preset.as_deref().and_then(Preset::parse);
        Ok(issue(ctx, conn, &old.name, preset, &old.scopes, Some(old.id)).await?.into())
    }

    fn for_replay(data: Value) -> Value {
        without_secret(data)
    }
}

fn revoked() -> Problem {
    Problem::invalid("api_key_revoked", "The API key is already revoked.")
}

pub(crate) struct Revoke;

impl Handler for Revoke {
    type Input = RevokeInput;
    type Output = ApiKeyOutput;

    async fn handle(ctx: &Ctx<'_>, conn: &mut PgConnection, input: RevokeInput) -> Result<Done<ApiKeyOutput>> {
        if input.confirm != Some(true) {
            return Err(Problem::confirmation_required("Revoking an API key needs `confirm: true`.").into());
        }
        let key = lock_key(ctx, conn, &input.api_key_id).await?;
        if key.revoked_at.is_some() {
            return Err(revoked().into());
        }
        let revoked = store::api_keys::revoke(conn, key.id).await?;
        store::usage::adjust(conn, key.workspace_id, &Delta::of(LimitKey::ApiKeys, -1)).await?;
        Ok(ApiKeyOutput { api_key: revoked.into() }.into())
    }
}
