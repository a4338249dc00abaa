//! What `serve --dev-idp` sets up at start: the local User (set up), their
//! Workspace and an operator API key, all through the same operations a client
//! calls, and a shell file to `source` with what a developer needs to call the
//! API at once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use svc_contract::OperationId;
use svc_core::{ClientHints, Reply, Service};

use super::{EMAIL, NAME, SUBJECT};
use crate::app::AppState;
use crate::config::ServeConfig;

/// The name of the API key made at each start; the previous ones are revoked.
pub const KEY_NAME: &str = "svc-api --dev-idp";
/// The name of the Workspace made when the local User owns none.
pub const WORKSPACE_NAME: &str = "Development";
/// How long the User token in the env file lasts: a working day.
const ENV_TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// How long the token the seeding itself calls with lasts.
const SEED_TOKEN_LIFETIME: Duration = Duration::from_secs(300);
const SCOPE: &str = "openid profile email";

/// What the seeding made or found.
pub struct DevSeed {
    pub base_url: String,
    pub issuer: String,
    pub user_id: String,
    pub workspace_id: String,
    pub workspace_slug: String,
    pub api_key_id: String,
    pub api_key_prefix: String,
    pub api_key: SecretString,
    pub token: SecretString,
    /// The API's `DATABASE_URL`, for operator commands from another shell.
    pub database_url: SecretString,
    /// Where the env file was written, as an absolute path.
    pub env_file: PathBuf,
}

/// Seeds the local User, their Workspace and a fresh operator API key (revoking
/// the ones earlier starts made), writes the env file, and logs where it is.
/// Idempotent across restarts: the User and Workspace are found again.
pub async fn prepare(state: &AppState, config: &ServeConfig) -> anyhow::Result<DevSeed> {
    let idp = state.dev_idp.as_deref().ok_or_else(|| anyhow::anyhow!("the development issuer is not running"))?;
    let service = &state.service;
    let user = svc_core::admin::user_setup(service.pool(), idp.issuer(), SUBJECT, EMAIL, Some(NAME)).await?;
    let (token, _) = idp.access_token(SCOPE, SEED_TOKEN_LIFETIME)?;
    let seeder = Seeder { service, bearer: format!("Bearer {token}") };

    let workspace = match seeder.owned_workspace().await? {
        Some(workspace) => workspace,
        None => {
            let created = seeder.call(OperationId::WorkspaceCreate, None, json!({ "name": WORKSPACE_NAME })).await?;
            created.data["workspace"].clone()
        }
    };
    let workspace_id = text(&workspace["id"])?;
    let entitlement = seeder.call(OperationId::WorkspaceEntitlementsInspect, Some(&workspace_id), json!({})).await?;
    if entitlement.data["entitlement"]["active"] != true {
        // A trial runs out after 14 days; a developer's machine should not.
        svc_core::admin::plan_set(service.pool(), &workspace_id, "pro", &[]).await?;
        tracing::info!(workspace = %workspace_id, "renewed the development Workspace's plan (pro)");
    }
    seeder.revoke_earlier_keys(&workspace_id).await?;
    let created = seeder
        .call(OperationId::ApiKeyCreate, Some(&workspace_id), json!({ "name": KEY_NAME, "preset": "operator" }))
        .await?;
    let (env_token, _) = idp.access_token(SCOPE, ENV_TOKEN_LIFETIME)?;
    let env_file = std::path::absolute(&config.dev_env_file)?;
    let seed = DevSeed {
        base_url: config.public_base_url(),
        issuer: idp.issuer().to_owned(),
        user_id: text(&user["user"]["id"])?,
        workspace_id,
        workspace_slug: text(&workspace["slug"])?,
        api_key_id: text(&created.data["apiKey"]["id"])?,
        api_key_prefix: text(&created.data["apiKey"]["keyPrefix"])?,
        api_key: SecretString::from(text(&created.data["secret"])?),
        token: SecretString::from(env_token),
        database_url: SecretString::from(config.database.url().to_owned()),
        env_file,
    };
    write_env_file(&seed.env_file, &env_file_text(&seed))?;
    tracing::info!(
        issuer = %seed.issuer,
        user = %seed.user_id,
        workspace = %seed.workspace_id,
        api_key = %seed.api_key_prefix,
        env_file = %seed.env_file.display(),
        "development identity provider on; load the credentials with: source {}",
        seed.env_file.display()
    );
    Ok(seed)
}

/// Calls operations as the local User, through the path every surface takes.
struct Seeder<'a> {
    service: &'a Service,
    bearer: String,
}

impl Seeder<'_> {
    async fn call(&self, id: OperationId, workspace: Option<&str>, input: Value) -> anyhow::Result<Reply> {
        let op = id.operation();
        let failed = |problem| anyhow::anyhow!("seeding the development data: {} answered {problem}", op.id);
        let caller = self.service.authenticate(Some(&self.bearer), workspace).await.map_err(failed)?;
        self.service.call(op, &caller, input, &ClientHints::default()).await.map_err(failed)
    }

    /// The oldest active Workspace the local User owns.
    async fn owned_workspace(&self) -> anyhow::Result<Option<Value>> {
        let mut cursor = Value::Null;
        loop {
            let page =
                self.call(OperationId::WorkspaceList, None, json!({ "pageSize": 100, "cursor": cursor })).await?;
            let found = page.data["workspaces"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|ws| ws["role"] == "owner" && ws["status"] == "active");
            if let Some(workspace) = found {
                return Ok(Some(workspace.clone()));
            }
            match page.next_cursor {
                Some(next) => cursor = next.into(),
                None => return Ok(None),
            }
        }
    }

    /// Revokes the active keys earlier starts made, so one dev key is live.
    async fn revoke_earlier_keys(&self, workspace: &str) -> anyhow::Result<()> {
        let mut earlier = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let page = self
                .call(OperationId::ApiKeyList, Some(workspace), json!({ "pageSize": 100, "cursor": cursor }))
                .await?;
            for key in page.data["apiKeys"].as_array().into_iter().flatten() {
                if key["name"] == KEY_NAME && key["revokedAt"].is_null() {
                    earlier.push(text(&key["id"])?);
                }
            }
            match page.next_cursor {
                Some(next) => cursor = next.into(),
                None => break,
            }
        }
        for id in earlier {
            self.call(OperationId::ApiKeyRevoke, Some(workspace), json!({ "apiKeyId": id, "confirm": true })).await?;
        }
        Ok(())
    }
}

fn text(value: &Value) -> anyhow::Result<String> {
    value.as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("seeding the development data: missing {value}"))
}

/// `'...'` for a POSIX shell.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

fn env_file_text(seed: &DevSeed) -> String {
    let export = |name: &str, value: &str| format!("export {name}={}\n", quoted(value));
    let mut text = String::new();
    text.push_str("# svc development credentials, written by `svc-api serve --dev-idp` at each start.\n");
    text.push_str("# Load them with: source .svc-dev.env (this file is secret: mode 0600, git-ignored).\n");
    text.push_str(&format!("# User: {EMAIL} ({SUBJECT} at {}); Workspace: {}.\n", seed.issuer, seed.workspace_slug));
    text.push_str(&export("SVC_URL", &seed.base_url));
    text.push_str(&export("SVC_ENDPOINT", &seed.base_url));
    text.push_str(&export("SVC_WORKSPACE", &seed.workspace_id));
    text.push_str("# A User access token of the local User, valid 12 hours (until the API restarts).\n");
    text.push_str(&export("SVC_TOKEN", seed.token.expose_secret()));
    text.push_str("# An operator Workspace API key; the next start revokes it and writes a new one.\n");
    text.push_str(&export("SVC_API_KEY", seed.api_key.expose_secret()));
    text.push_str("# The database this API serves, so `svc-api admin ...` from another terminal reaches it.\n");
    text.push_str(&export("DATABASE_URL", seed.database_url.expose_secret()));
    text.push_str(
        "#
# Next:
#   curl -s -X POST \"$SVC_URL/api/public/operations/identity/status\" -H \"Authorization: Bearer $SVC_TOKEN\"
#   curl -s -X POST \"$SVC_URL/api/public/operations/agents/list\" -H \"Authorization: Bearer $SVC_API_KEY\"
#   svc auth status                # the CLI reads SVC_ENDPOINT and SVC_API_KEY
#   svc auth login                 # a User session from the built-in issuer; SVC_API_KEY
#                                  # comes first, so for the session: unset SVC_API_KEY
#   MCP: \"$SVC_URL/api/mcp\" with the header \"Authorization: Bearer $SVC_API_KEY\"
",
    );
    text
}

/// Writes the file whole (a temporary file renamed over it), readable by its
/// owner only.
fn write_env_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path.file_name().ok_or_else(|| anyhow::anyhow!("{} is not a file path", path.display()))?;
    let temporary = path.with_file_name(format!("{}.tmp", name.to_string_lossy()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let write = || -> std::io::Result<()> {
        let mut file = options.open(&temporary)?;
        #[cfg(unix)]
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    };
    write().map_err(|e| anyhow::anyhow!("cannot write the development env file {}: {e}", path.display()))
}
