//! The operation catalog: the single list of the 30 operations every surface serves;
//! beside it, the web application's membership operations ([`ACCOUNT`]), which
//! share the call path but are no part of the catalog.
//!
//! Each entry says how an operation is reached (HTTP path, CLI command, MCP tool),
//! who may call it (auth kinds, role, scope), whether it needs a Workspace, whether
//! it mutates, which problems it adds to the common four, and the JSON Schemas of
//! its input and output.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::operations::{agent, api_key, identity, knowledge_source, member, public_chat, widget, workspace};
use crate::problem::ProblemCode::{self, *};
use crate::schema::{DIALECT, input_schema, output_schema};
use crate::scope::{Role, Scope};

/// How a caller authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthKind {
    /// A User session (an OAuth access token).
    OauthToken,
    /// A Workspace API key.
    WorkspaceApiKey,
}

impl AuthKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OauthToken => "oauth_token",
            Self::WorkspaceApiKey => "workspace_api_key",
        }
    }
}

/// Whether an operation acts on a selected Workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceRequirement {
    Required,
    Optional,
    None,
}

impl WorkspaceRequirement {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Optional => "optional",
            Self::None => "none",
        }
    }
}

/// Identifies an operation in code; [`Operation::id`] spells it as the spec does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationId {
    IdentityStatus,
    WorkspaceList,
    WorkspaceInspect,
    WorkspaceCreate,
    WorkspaceRename,
    WorkspaceEntitlementsInspect,
    AgentList,
    AgentInspect,
    AgentCreate,
    AgentConfigure,
    AgentDelete,
    ApiKeyList,
    ApiKeyCreate,
    ApiKeyRotate,
    ApiKeyRevoke,
    KnowledgeSourceList,
    KnowledgeSourceInspect,
    KnowledgeSourceAdd,
    KnowledgeSourceWait,
    KnowledgeSourceReconcile,
    KnowledgeSourceReplace,
    KnowledgeSourceDelete,
    PublicChatInspect,
    PublicChatEnable,
    PublicChatDisable,
    PublicChatUrl,
    WidgetInspect,
    WidgetConfigure,
    WidgetManifest,
    WidgetVerify,
    // The web application's operations ([`ACCOUNT`]), after the catalog's.
    MemberList,
    MemberInvite,
    MemberSetRole,
    MemberRemove,
    InviteList,
    InviteAccept,
}

/// Body limits (contract §1).
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
const CONTENT_BODY_LIMIT: usize = 8 * 1024 * 1024;
const MANIFEST_BODY_LIMIT: usize = 128 * 1024 * 1024;
/// The largest body limit of any operation.
pub const MAX_BODY_LIMIT: usize = MANIFEST_BODY_LIMIT;
/// The smallest body limit of any operation.
pub const MIN_BODY_LIMIT: usize = DEFAULT_BODY_LIMIT;

/// One entry of the catalog.
#[derive(Debug)]
pub struct Operation {
    pub op: OperationId,
    /// The operation id as the spec spells it, e.g. `agent.create`.
    pub id: &'static str,
    /// Path under `/api/public/operations/`.
    pub path: &'static str,
    pub cli_command: &'static str,
    pub summary: &'static str,
    pub auth: &'static [AuthKind],
    pub workspace: WorkspaceRequirement,
    pub mutating: bool,
    /// The scope a Workspace API key needs; `None` for operations any key may call
    /// (`identity.status`) and for those keys may not call at all.
    pub scope: Option<Scope>,
    /// The least role a User needs in the selected Workspace.
    pub min_role: Role,
    /// Problems beyond the common four (spec "Problems per operation").
    pub problems: &'static [ProblemCode],
    /// Largest request body, in bytes.
    pub body_limit: usize,
    input_schema: fn() -> Map<String, Value>,
    output_schema: fn() -> Map<String, Value>,
    paged: bool,
}

impl Operation {
    pub fn allows(&self, kind: AuthKind) -> bool {
        self.auth.contains(&kind)
    }

    /// The MCP tool name: `svc_` and the id with dots as underscores.
    pub fn tool_name(&self) -> String {
        format!("svc_{}", self.id.replace('.', "_"))
    }

    /// Whether the spec lists `code` among this operation's additional problems.
    pub fn lists(&self, code: ProblemCode) -> bool {
        self.problems.contains(&code)
    }

    /// Every problem the call path can answer this operation with: the common
    /// four, the spec's list, and what the call path's own rules add (contract
    /// §1: security wins over the table). A User may not have finished setup;
    /// an API key may lack the scope, name another Workspace, or not be allowed
    /// at all; a role may be too low; a Workspace may not be selectable.
    pub fn possible_problems(&self) -> Vec<ProblemCode> {
        let keys = self.allows(AuthKind::WorkspaceApiKey);
        let mut problems: Vec<ProblemCode> = ProblemCode::COMMON.to_vec();
        problems.extend_from_slice(self.problems);
        if self.allows(AuthKind::OauthToken) {
            problems.push(SetupRequired);
        }
        if self.workspace != WorkspaceRequirement::None {
            problems.push(WorkspaceSelectionRequired);
        }
        let refused_key = !keys || self.scope.is_some() || self.workspace != WorkspaceRequirement::None;
        if refused_key || self.min_role > Role::Member {
            problems.push(PermissionDenied);
        }
        problems.sort_by_key(|p| ProblemCode::ALL.iter().position(|c| c == p));
        problems.dedup();
        problems
    }

    /// Input schema: the input type's schema, plus `idempotencyKey` when mutating.
    pub fn input_schema(&self) -> &'static Map<String, Value> {
        &schemas()[self.op as usize].0
    }

    /// Output schema: the success envelope around the output type.
    pub fn output_schema(&self) -> &'static Map<String, Value> {
        &schemas()[self.op as usize].1
    }

    fn build_input_schema(&self) -> Map<String, Value> {
        let mut schema = (self.input_schema)();
        if self.mutating {
            let properties = schema.entry("properties").or_insert_with(|| json!({}));
            if let Value::Object(properties) = properties {
                properties.insert(
                    "idempotencyKey".into(),
                    json!({
                        "description": "Makes a retry safe: the same key with the same input returns the first result.",
                        "type": "string",
                        "minLength": 8,
                        "maxLength": 200
                    }),
                );
            }
        }
        let mut schema = Value::Object(schema);
        crate::schema::forbid_nul(&mut schema);
        match schema {
            Value::Object(schema) => with_dialect(schema),
            _ => unreachable!("an input schema is an object"),
        }
    }

    fn build_output_schema(&self) -> Map<String, Value> {
        let mut data = (self.output_schema)();
        data.remove("$schema");
        let mut meta = json!({
            "type": "object",
            "properties": { "requestId": { "type": "string", "minLength": 1 } },
            "required": ["requestId"],
            "additionalProperties": false
        });
        if self.paged {
            meta["properties"]["nextCursor"] = json!({
                "description": "Present only when more results remain.",
                "type": "string",
                "minLength": 1
            });
        }
        let envelope = json!({
            "type": "object",
            "properties": { "data": data, "meta": meta },
            "required": ["data", "meta"],
            "additionalProperties": false
        });
        match envelope {
            Value::Object(map) => with_dialect(map),
            _ => unreachable!("the envelope is an object literal"),
        }
    }

    /// This entry as it appears in the published catalog (contract §2).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "path": self.path,
            "cliCommand": self.cli_command,
            "summary": self.summary,
            "auth": self.auth.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            "workspace": self.workspace.as_str(),
            "mutating": self.mutating,
            "scope": self.scope.map(|s| s.as_str()),
            "problems": self.problems.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            "inputSchema": self.input_schema(),
            "outputSchema": self.output_schema(),
        })
    }
}

fn with_dialect(schema: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::with_capacity(schema.len() + 1);
    out.insert("$schema".into(), DIALECT.into());
    out.extend(schema.into_iter().filter(|(k, _)| k != "$schema"));
    out
}

type SchemaPair = (Map<String, Value>, Map<String, Value>);

fn schemas() -> &'static [SchemaPair] {
    static SCHEMAS: OnceLock<Vec<SchemaPair>> = OnceLock::new();
    SCHEMAS.get_or_init(|| every_operation().map(|op| (op.build_input_schema(), op.build_output_schema())).collect())
}

/// Every operation the call path runs, in [`OperationId`] order: the
/// catalog's, then the web application's ([`ACCOUNT`]).
pub fn every_operation() -> impl Iterator<Item = &'static Operation> {
    CATALOG.iter().chain(ACCOUNT.iter())
}

/// Looks an operation up by its HTTP path (below `/api/public/operations/`).
pub fn by_path(path: &str) -> Option<&'static Operation> {
    CATALOG.iter().find(|op| op.path == path)
}

/// The operation a mistyped path most likely meant: the one whose path is the
/// fewest edits away, when that is close enough to be a slip (`agent/create`,
/// `agents/crate`); an operation id (`agent.create`) names its own.
pub fn nearest_path(path: &str) -> Option<&'static Operation> {
    if let Some(op) = by_id(path) {
        return Some(op);
    }
    // Anything much longer than every path is not a slip of one.
    if path.len() > 64 {
        return None;
    }
    CATALOG
        .iter()
        .map(|op| (edit_distance(path.as_bytes(), op.path.as_bytes()), op))
        .filter(|(distance, op)| *distance <= (op.path.len() / 4).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, op)| op)
}

/// Levenshtein distance, one row at a time.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(x != y);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// The command-line flag of an input property, without its dashes (contract
/// §14): `agentId` → `agent-id`.
pub fn flag_name(property: &str) -> String {
    let mut out = String::with_capacity(property.len() + 4);
    for c in property.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Looks an operation up by its MCP tool name.
pub fn by_tool_name(name: &str) -> Option<&'static Operation> {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| CATALOG.iter().map(Operation::tool_name).collect());
    names.iter().position(|tool| tool == name).map(|i| &CATALOG[i])
}

/// Looks an operation up by its id (`agent.create`).
pub fn by_id(id: &str) -> Option<&'static Operation> {
    CATALOG.iter().find(|op| op.id == id)
}

impl OperationId {
    pub fn operation(self) -> &'static Operation {
        match CATALOG.get(self as usize) {
            Some(op) => op,
            None => &ACCOUNT[self as usize - CATALOG.len()],
        }
    }
}

/// The `operations` array of the published catalog.
pub fn operations_json() -> Value {
    Value::Array(CATALOG.iter().map(Operation::to_json).collect())
}

/// The published catalog: `GET /api/public/catalog` and `schemas/catalog.json`.
pub fn document() -> Value {
    json!({
        "contract": crate::CONTRACT_VERSION,
        "catalogDigest": catalog_digest(),
        "operations": operations_json(),
    })
}

/// `sha256:` and the hex SHA-256 of the JCS form of [`operations_json`] (contract §2).
pub fn catalog_digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| crate::digest::sha256_jcs(&operations_json()))
}

const BOTH: &[AuthKind] = &[AuthKind::OauthToken, AuthKind::WorkspaceApiKey];
const USER_ONLY: &[AuthKind] = &[AuthKind::OauthToken];

use WorkspaceRequirement::{None as NoWorkspace, Optional, Required};

/// Builds one entry; named arguments keep the table below readable.
macro_rules! operation {
    (
        $op:ident, $id:literal, $path:literal, $cli:literal, $summary:literal,
        auth: $auth:expr, workspace: $ws:expr, mutating: $mutating:literal,
        scope: $scope:expr, role: $role:ident, problems: [$($problem:ident),*],
        input: $input:ty, output: $output:ty $(, body_limit: $limit:expr)? $(, paged: $paged:literal)?
    ) => {
        Operation {
            op: OperationId::$op,
            id: $id,
            path: $path,
            cli_command: $cli,
            summary: $summary,
            auth: $auth,
            workspace: $ws,
            mutating: $mutating,
            scope: $scope,
            min_role: Role::$role,
            problems: &[$($problem),*],
            body_limit: operation!(@limit $($limit)?),
            input_schema: input_schema::<$input>,
            output_schema: output_schema::<$output>,
            paged: operation!(@paged $($paged)?),
        }
    };
    (@limit) => { DEFAULT_BODY_LIMIT };
    (@limit $limit:expr) => { $limit };
    (@paged) => { false };
    (@paged $paged:literal) => { $paged };
}

/// The catalog, in [`OperationId`] order.
pub static CATALOG: [Operation; 30] = [
    operation!(IdentityStatus, "identity.status", "identity/status", "auth status",
        "Reports who is calling, with which credential, against which Workspace.",
        auth: BOTH, workspace: Optional, mutating: false, scope: None, role: Member,
        problems: [SetupRequired, WorkspaceSelectionRequired],
        input: identity::StatusInput, output: identity::StatusOutput),
    operation!(WorkspaceList, "workspace.list", "workspaces/list", "workspace list",
        "Lists the Workspaces the User belongs to.",
        auth: USER_ONLY, workspace: NoWorkspace, mutating: false, scope: None, role: Member,
        problems: [],
        input: workspace::ListInput, output: workspace::ListOutput, paged: true),
    operation!(WorkspaceInspect, "workspace.inspect", "workspaces/inspect", "workspace inspect",
        "Shows the selected Workspace.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::WorkspaceRead), role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound],
        input: workspace::InspectInput, output: workspace::WorkspaceOutput),
    operation!(WorkspaceCreate, "workspace.create", "workspaces/create", "workspace create",
        "Creates a Workspace owned by the User, on a trial.",
        auth: USER_ONLY, workspace: NoWorkspace, mutating: true, scope: None, role: Member,
        problems: [PermissionDenied, IdempotencyConflict],
        input: workspace::CreateInput, output: workspace::WorkspaceOutput),
    operation!(WorkspaceRename, "workspace.rename", "workspaces/rename", "workspace rename",
        "Renames the selected Workspace (Admins and Owners).",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, WorkspaceArchived, IdempotencyConflict],
        input: workspace::RenameInput, output: workspace::WorkspaceOutput),
    operation!(WorkspaceEntitlementsInspect, "workspace.entitlements.inspect", "workspaces/entitlements/inspect", "workspace entitlements",
        "Shows the selected Workspace's plan, trial state, limits and usage.",
        auth: USER_ONLY, workspace: Required, mutating: false, scope: None, role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound],
        input: workspace::EntitlementsInspectInput, output: workspace::EntitlementsInspectOutput),
    operation!(AgentList, "agent.list", "agents/list", "agent list",
        "Lists the Workspace's active Agents.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::AgentRead), role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound, EntitlementRequired],
        input: agent::ListInput, output: agent::ListOutput, paged: true),
    operation!(AgentInspect, "agent.inspect", "agents/inspect", "agent inspect",
        "Shows one Agent.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::AgentRead), role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound, EntitlementRequired],
        input: agent::InspectInput, output: agent::AgentOutput),
    operation!(AgentCreate, "agent.create", "agents/create", "agent create",
        "Creates an Agent in the Workspace.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::AgentWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, WorkspaceArchived, EntitlementRequired, LimitExceeded, IdempotencyConflict],
        input: agent::CreateInput, output: agent::AgentOutput),
    operation!(AgentConfigure, "agent.configure", "agents/configure", "agent configure",
        "Updates the supplied fields of an Agent.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::AgentWrite), role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound, WorkspaceArchived, EntitlementRequired, IdempotencyConflict],
        input: agent::ConfigureInput, output: agent::AgentOutput),
    operation!(AgentDelete, "agent.delete", "agents/delete", "agent delete",
        "Deletes an Agent (needs `confirm: true`).",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::AgentWrite), role: Member,
        problems: [WorkspaceSelectionRequired, ResourceNotFound, WorkspaceArchived, ConfirmationRequired, IdempotencyConflict],
        input: agent::DeleteInput, output: agent::DeleteOutput),
    operation!(ApiKeyList, "api_key.list", "api-keys/list", "api-key list",
        "Lists the Workspace's API keys, never their secrets (Admins and Owners).",
        auth: USER_ONLY, workspace: Required, mutating: false, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound],
        input: api_key::ListInput, output: api_key::ListOutput, paged: true),
    operation!(ApiKeyCreate, "api_key.create", "api-keys/create", "api-key create",
        "Creates a Workspace API key from a preset or scopes; its secret is returned once.",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, WorkspaceArchived, EntitlementRequired, LimitExceeded, IdempotencyConflict],
        input: api_key::CreateInput, output: api_key::SecretOutput),
    operation!(ApiKeyRotate, "api_key.rotate", "api-keys/rotate", "api-key rotate",
        "Creates a replacement for a key; the old one stays active until revoked.",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, LimitExceeded, IdempotencyConflict],
        input: api_key::RotateInput, output: api_key::SecretOutput),
    operation!(ApiKeyRevoke, "api_key.revoke", "api-keys/revoke", "api-key revoke",
        "Revokes a key for good (needs `confirm: true`).",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, ConfirmationRequired, IdempotencyConflict],
        input: api_key::RevokeInput, output: api_key::ApiKeyOutput),
    operation!(KnowledgeSourceList, "knowledge_source.list", "knowledge-sources/list", "knowledge-source list",
        "Lists an Agent's Knowledge Sources.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::KnowledgeSourceRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: knowledge_source::ListInput, output: knowledge_source::ListOutput, paged: true),
    operation!(KnowledgeSourceInspect, "knowledge_source.inspect", "knowledge-sources/inspect", "knowledge-source inspect",
        "Shows one Knowledge Source with its active and pending revisions.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::KnowledgeSourceRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: knowledge_source::SourceInput, output: knowledge_source::KnowledgeSourceOutput),
    operation!(KnowledgeSourceAdd, "knowledge_source.add", "knowledge-sources/add", "knowledge-source add",
        "Adds reviewed content to an Agent; it is processed in the background until active.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::KnowledgeSourceWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, LimitExceeded, IdempotencyConflict],
        input: knowledge_source::AddInput, output: knowledge_source::KnowledgeSourceOutput, body_limit: CONTENT_BODY_LIMIT),
    operation!(KnowledgeSourceWait, "knowledge_source.wait", "knowledge-sources/wait", "knowledge-source wait",
        "Reports a source's processing state and when to ask again; never holds the request open.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::KnowledgeSourceRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ProcessingFailed, ProcessingTimeout],
        input: knowledge_source::SourceInput, output: knowledge_source::WaitOutput),
    operation!(KnowledgeSourceReconcile, "knowledge_source.reconcile", "knowledge-sources/reconcile", "knowledge-source reconcile",
        "Plans, or applies, a manifest of an Agent's desired Knowledge Sources.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::KnowledgeSourceWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, LimitExceeded, ConfirmationRequired, IdempotencyConflict],
        input: knowledge_source::ReconcileInput, output: crate::knowledge::ReconcileRun, body_limit: MANIFEST_BODY_LIMIT),
    operation!(KnowledgeSourceReplace, "knowledge_source.replace", "knowledge-sources/replace", "knowledge-source replace",
        "Submits a new revision; the last good one keeps answering until it is active.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::KnowledgeSourceWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, LimitExceeded, IdempotencyConflict],
        input: knowledge_source::ReplaceInput, output: knowledge_source::KnowledgeSourceOutput, body_limit: CONTENT_BODY_LIMIT),
    operation!(KnowledgeSourceDelete, "knowledge_source.delete", "knowledge-sources/delete", "knowledge-source delete",
        "Deletes a source (needs `tombstone`, `prune` and `confirm` equal to its id).",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::KnowledgeSourceWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ConfirmationRequired, IdempotencyConflict],
        input: knowledge_source::DeleteInput, output: knowledge_source::DeleteOutput),
    operation!(PublicChatInspect, "public_chat.inspect", "public-chats/inspect", "public-chat inspect",
        "Shows an Agent's Public Chat.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::PublicChatRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: public_chat::AgentInput, output: public_chat::PublicChatOutput),
    operation!(PublicChatEnable, "public_chat.enable", "public-chats/enable", "public-chat enable",
        "Enables an Agent's Public Chat at its stable URL.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::PublicChatWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ProcessingFailed, IdempotencyConflict],
        input: public_chat::EnableInput, output: public_chat::PublicChatOutput),
    operation!(PublicChatDisable, "public_chat.disable", "public-chats/disable", "public-chat disable",
        "Disables an Agent's Public Chat (needs `confirm` equal to the Agent id).",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::PublicChatWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ConfirmationRequired, IdempotencyConflict],
        input: public_chat::DisableInput, output: public_chat::PublicChatOutput),
    operation!(PublicChatUrl, "public_chat.url", "public-chats/url", "public-chat url",
        "Gives the stable URL of an Agent's Public Chat.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::PublicChatRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: public_chat::AgentInput, output: public_chat::UrlOutput),
    operation!(WidgetInspect, "widget.inspect", "widgets/inspect", "widget inspect",
        "Shows an Agent's effective Widget configuration.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::WidgetRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: widget::AgentInput, output: widget::ConfigurationOutput),
    operation!(WidgetConfigure, "widget.configure", "widgets/configure", "widget configure",
        "Merges a partial Widget configuration; removed origins must be confirmed.",
        auth: BOTH, workspace: Required, mutating: true, scope: Some(Scope::WidgetWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ProcessingFailed, ConfirmationRequired, IdempotencyConflict],
        input: widget::ConfigureInput, output: widget::ConfigurationOutput),
    operation!(WidgetManifest, "widget.manifest", "widgets/manifest", "widget manifest",
        "Gives everything a page needs to embed the Widget; no secrets.",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::WidgetRead), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired],
        input: widget::AgentInput, output: widget::ManifestOutput),
    operation!(WidgetVerify, "widget.verify", "widgets/verify", "widget verify",
        "Checks the Widget end to end and asks one real question (spends one conversation).",
        auth: BOTH, workspace: Required, mutating: false, scope: Some(Scope::WidgetWrite), role: Member,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, WorkspaceArchived, EntitlementRequired, ProcessingFailed],
        input: widget::VerifyInput, output: widget::VerifyOutput),
];

/// The web application's membership operations (`/account`), in
/// [`OperationId`] order after the catalog's. They run through the same call
/// path as the catalog's (validation, the role they need, idempotency, the
/// callers each process keeps) but are no part of the catalog: no HTTP path,
/// CLI command or MCP tool serves them, and the published catalog, its digest
/// and OpenAPI leave them out. Only Users call them.
pub static ACCOUNT: [Operation; 6] = [
    operation!(MemberList, "member.list", "", "",
        "Lists the selected Workspace's members.",
        auth: USER_ONLY, workspace: Required, mutating: false, scope: None, role: Member,
        problems: [WorkspaceSelectionRequired],
        input: member::ListInput, output: member::ListOutput),
    operation!(MemberInvite, "member.invite", "", "",
        "Makes a single-use invite link with a role (an owner's role only from an owner).",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, WorkspaceArchived, IdempotencyConflict],
        input: member::InviteInput, output: member::InviteOutput),
    operation!(MemberSetRole, "member.set_role", "", "",
        "Changes a member's role; the last owner stays an owner.",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, IdempotencyConflict],
        input: member::SetRoleInput, output: member::MemberOutput),
    operation!(MemberRemove, "member.remove", "", "",
        "Removes a member; the last owner stays.",
        auth: USER_ONLY, workspace: Required, mutating: true, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied, ResourceNotFound, IdempotencyConflict],
        input: member::RemoveInput, output: member::RemovedOutput),
    operation!(InviteList, "invite.list", "", "",
        "Lists the selected Workspace's open invites.",
        auth: USER_ONLY, workspace: Required, mutating: false, scope: None, role: Admin,
        problems: [WorkspaceSelectionRequired, PermissionDenied],
        input: member::InvitesInput, output: member::InvitesOutput),
    operation!(InviteAccept, "invite.accept", "", "",
        "Spends an invite and makes the User a member with its role.",
        auth: USER_ONLY, workspace: NoWorkspace, mutating: true, scope: None, role: Member,
        problems: [IdempotencyConflict],
        input: member::AcceptInput, output: member::AcceptOutput),
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn body_limits_lie_between_the_smallest_and_the_largest() {
        for op in CATALOG.iter() {
            assert!((MIN_BODY_LIMIT..=MAX_BODY_LIMIT).contains(&op.body_limit), "{}", op.id);
        }
    }

    #[test]
    fn thirty_unique_operations_in_id_order() {
        assert_eq!(CATALOG.len(), 30);
        for (i, op) in CATALOG.iter().enumerate() {
            assert_eq!(op.op as usize, i, "{} is out of order", op.id);
        }
        let unique = |f: fn(&Operation) -> String| CATALOG.iter().map(f).collect::<HashSet<_>>().len();
        assert_eq!(unique(|op| op.id.to_owned()), 30);
        assert_eq!(unique(|op| op.path.to_owned()), 30);
        assert_eq!(unique(|op| op.cli_command.to_owned()), 30);
        assert_eq!(unique(Operation::tool_name), 30);
        for op in &CATALOG {
            assert_eq!(by_path(op.path).map(|o| o.id), Some(op.id));
            assert_eq!(by_tool_name(&op.tool_name()).map(|o| o.id), Some(op.id));
            assert!(op.tool_name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        assert_eq!(by_tool_name("svc_knowledge_source_add").map(|o| o.id), Some("knowledge_source.add"));
    }

    #[test]
    fn the_web_applications_operations_follow_the_catalog_and_are_none_of_it() {
        for (i, op) in ACCOUNT.iter().enumerate() {
            assert_eq!(op.op as usize, CATALOG.len() + i, "{} is out of order", op.id);
            assert!(std::ptr::eq(op.op.operation(), op), "{}", op.id);
            assert_eq!(op.auth, USER_ONLY, "{}: Users only", op.id);
            assert_eq!(by_id(op.id).map(|o| o.id), None, "{} is found by no catalog lookup", op.id);
            assert_eq!(by_tool_name(&op.tool_name()).map(|o| o.id), None, "{}", op.id);
            assert_eq!(nearest_path(op.id).map(|o| o.id), None, "{}", op.id);
            assert!(!operations_json().to_string().contains(op.id), "{} is not published", op.id);
        }
        assert_eq!(every_operation().count(), CATALOG.len() + ACCOUNT.len());
    }

    /// Contract §5's scope table, verbatim.
    #[test]
    fn scopes_per_contract() {
        let expected: &[(&str, Option<&str>)] = &[
            ("identity.status", None),
            ("workspace.inspect", Some("workspace:read")),
            ("agent.list", Some("agent:read")),
            ("agent.inspect", Some("agent:read")),
            ("agent.create", Some("agent:write")),
            ("agent.configure", Some("agent:write")),
            ("agent.delete", Some("agent:write")),
            ("knowledge_source.list", Some("knowledge_source:read")),
            ("knowledge_source.inspect", Some("knowledge_source:read")),
            ("knowledge_source.wait", Some("knowledge_source:read")),
            ("knowledge_source.add", Some("knowledge_source:write")),
            ("knowledge_source.replace", Some("knowledge_source:write")),
            ("knowledge_source.delete", Some("knowledge_source:write")),
            ("knowledge_source.reconcile", Some("knowledge_source:write")),
            ("public_chat.inspect", Some("public_chat:read")),
            ("public_chat.url", Some("public_chat:read")),
            ("public_chat.enable", Some("public_chat:write")),
            ("public_chat.disable", Some("public_chat:write")),
            ("widget.inspect", Some("widget:read")),
            ("widget.manifest", Some("widget:read")),
            ("widget.configure", Some("widget:write")),
            ("widget.verify", Some("widget:write")),
        ];
        for (id, scope) in expected {
            let op = by_id(id).unwrap();
            assert!(op.allows(AuthKind::WorkspaceApiKey), "{id} must accept API keys");
            assert_eq!(op.scope.map(|s| s.as_str()), *scope, "{id}");
        }
        let user_only = [
            "workspace.list",
            "workspace.create",
            "workspace.rename",
            "workspace.entitlements.inspect",
            "api_key.list",
            "api_key.create",
            "api_key.rotate",
            "api_key.revoke",
        ];
        for id in user_only {
            let op = by_id(id).unwrap();
            assert_eq!(op.auth, USER_ONLY, "{id}");
            assert_eq!(op.scope, None, "{id}");
        }
        assert_eq!(expected.len() + user_only.len(), 30);
    }

    #[test]
    fn admin_only_operations() {
        let admin: Vec<&str> = CATALOG.iter().filter(|op| op.min_role == Role::Admin).map(|op| op.id).collect();
        assert_eq!(admin, ["workspace.rename", "api_key.list", "api_key.create", "api_key.rotate", "api_key.revoke"]);
    }

    /// The spec's "Problems per operation" table, verbatim.
    #[test]
    fn problems_per_spec() {
        let table = "\
identity.status | SU, WS
workspace.list | none
workspace.inspect | WS, NF
workspace.create | PD, ID
workspace.rename | WS, PD, WA, ID
workspace.entitlements.inspect | WS, NF
agent.list | WS, NF, EN
agent.inspect | WS, NF, EN
agent.create | WS, PD, WA, EN, LM, ID
agent.configure | WS, NF, WA, EN, ID
agent.delete | WS, NF, WA, CF, ID
api_key.list | WS, PD, NF
api_key.create | WS, PD, WA, EN, LM, ID
api_key.rotate | WS, PD, NF, WA, EN, LM, ID
api_key.revoke | WS, PD, NF, CF, ID
knowledge_source.list | WS, PD, NF, WA, EN
knowledge_source.inspect | WS, PD, NF, WA, EN
knowledge_source.add | WS, PD, NF, WA, EN, LM, ID
knowledge_source.wait | WS, PD, NF, WA, EN, PF, PT
knowledge_source.reconcile | WS, PD, NF, WA, EN, LM, CF, ID
knowledge_source.replace | WS, PD, NF, WA, EN, LM, ID
knowledge_source.delete | WS, PD, NF, WA, EN, CF, ID
public_chat.inspect | WS, PD, NF, WA, EN
public_chat.enable | WS, PD, NF, WA, EN, PF, ID
public_chat.disable | WS, PD, NF, WA, EN, CF, ID
public_chat.url | WS, PD, NF, WA, EN
widget.inspect | WS, PD, NF, WA, EN
widget.configure | WS, PD, NF, WA, EN, PF, CF, ID
widget.manifest | WS, PD, NF, WA, EN
widget.verify | WS, PD, NF, WA, EN, PF";
        let code = |abbr: &str| match abbr {
            "WS" => WorkspaceSelectionRequired,
            "PD" => PermissionDenied,
            "NF" => ResourceNotFound,
            "WA" => WorkspaceArchived,
            "EN" => EntitlementRequired,
            "LM" => LimitExceeded,
            "CF" => ConfirmationRequired,
            "ID" => IdempotencyConflict,
            "PF" => ProcessingFailed,
            "PT" => ProcessingTimeout,
            "SU" => SetupRequired,
            other => panic!("unknown abbreviation {other}"),
        };
        for line in table.lines() {
            let (id, abbrs) = line.split_once(" | ").unwrap();
            let expected: Vec<ProblemCode> =
                if abbrs == "none" { vec![] } else { abbrs.split(", ").map(code).collect() };
            let op = by_id(id).unwrap();
            let mut actual = op.problems.to_vec();
            let mut expected_sorted = expected.clone();
            actual.sort_by_key(|c| *c as u8);
            expected_sorted.sort_by_key(|c| *c as u8);
            assert_eq!(actual, expected_sorted, "{id}");
        }
    }

    #[test]
    fn nearest_path_names_the_operation_a_slip_meant() {
        let nearest = |path: &str| nearest_path(path).map(|op| op.path);
        assert_eq!(nearest("agent/create"), Some("agents/create"));
        assert_eq!(nearest("agents/crate"), Some("agents/create"));
        assert_eq!(nearest("agent.create"), Some("agents/create"));
        assert_eq!(nearest("knowledge_sources/add"), Some("knowledge-sources/add"));
        assert_eq!(nearest("agents/create"), Some("agents/create"));
        assert_eq!(nearest("billing/charge"), None);
        assert_eq!(nearest(""), None);
        assert_eq!(nearest(&"x".repeat(10_000)), None);
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
    }

    #[test]
    fn idempotency_key_exactly_on_mutating_operations() {
        for op in &CATALOG {
            let properties = op.input_schema().get("properties");
            let has_key = properties.and_then(|p| p.get("idempotencyKey")).is_some();
            assert_eq!(has_key, op.mutating, "{}", op.id);
        }
    }

    fn assert_closed_objects(schema: &Value, at: &str) {
        match schema {
            Value::Object(map) => {
                // A record with named properties is closed; a map (`limits`) says
                // what its values are instead.
                if map.get("type") == Some(&json!("object")) {
                    let closed = map.get("additionalProperties") == Some(&json!(false));
                    let map_of = !map.contains_key("properties")
                        && map.get("additionalProperties").is_some_and(Value::is_object);
                    assert!(closed || map_of, "open object at {at}");
                }
                for (key, value) in map {
                    assert_closed_objects(value, &format!("{at}/{key}"));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    assert_closed_objects(item, &format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_object_rejects_unknown_properties() {
        for op in &CATALOG {
            assert_closed_objects(&Value::Object(op.input_schema().clone()), &format!("{} input", op.id));
            assert_closed_objects(&Value::Object(op.output_schema().clone()), &format!("{} output", op.id));
        }
    }

    #[test]
    fn schemas_are_valid_2020_12() {
        for op in &CATALOG {
            for schema in [op.input_schema(), op.output_schema()] {
                let schema = Value::Object(schema.clone());
                jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("{}: {e}", op.id));
                jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{}: {e}", op.id));
            }
        }
    }

    /// A known answer computed apart from this code (Python's `json.dumps` with
    /// sorted keys and no white space, then SHA-256), and a digest that moves
    /// with any change to any operation.
    #[test]
    fn the_digest_is_sha256_of_the_canonical_operations() {
        let sample = json!({"operations": [{"z": null, "id": "a.b", "n": 1.5, "s": "é\n", "list": [1, true, {"b": 2, "a": "x"}]}]});
        assert_eq!(
            crate::digest::sha256_jcs(&sample),
            "sha256:b8cf816120e1e7d588d3516ceaa8e2e016f16b0c4453d36f9441590ed4a1cdfd"
        );
        let operations = operations_json();
        let digest = crate::digest::sha256_jcs(&operations);
        assert_eq!(catalog_digest(), digest);
        for i in 0..CATALOG.len() {
            let mut changed = operations.clone();
            changed[i]["summary"] = json!("changed");
            assert_ne!(crate::digest::sha256_jcs(&changed), digest, "operation {i}");
        }
    }

    #[test]
    fn possible_problems_cover_the_call_path_rules() {
        let of = |id: &str| by_id(id).unwrap().possible_problems();
        // A scope the key lacks, and a role the member lacks.
        assert!(of("agent.configure").contains(&PermissionDenied));
        assert!(of("workspace.rename").contains(&PermissionDenied));
        // Keys may not call User-only operations; Users may not have set up.
        assert!(of("workspace.list").contains(&PermissionDenied));
        assert!(of("workspace.list").contains(&SetupRequired));
        assert!(!of("workspace.list").contains(&WorkspaceSelectionRequired));
        // identity.status: a key naming another Workspace, an unknown one.
        assert!(of("identity.status").contains(&PermissionDenied));
        for op in &CATALOG {
            let possible = op.possible_problems();
            for code in ProblemCode::COMMON.iter().chain(op.problems) {
                assert!(possible.contains(code), "{} misses {code}", op.id);
            }
            let mut unique = possible.clone();
            unique.dedup();
            assert_eq!(unique, possible, "{}", op.id);
        }
    }
}
