//! `svc-contract`: the public contract of svc as code, with no I/O.
//!
//! Resource and input/output types, problem codes, scopes, the operation catalog
//! with its JSON Schemas and digest, the validation of an input against them,
//! and the OpenAPI document generated from it.
//! Every other crate, the command-line client included, builds on this one.

pub mod catalog;
pub mod chat;
pub mod digest;
pub mod files;
pub mod identity;
pub mod knowledge;
pub mod openapi;
pub mod operations;
pub mod patch;
pub mod problem;
pub mod resources;
pub mod schema;
pub mod scope;
pub mod validate;

pub use catalog::{AuthKind, CATALOG, Operation, OperationId, WorkspaceRequirement};
pub use problem::{Issue, Problem, ProblemCode};
pub use scope::{Preset, Role, Scope};

/// Version of the public contract.
pub const CONTRACT_VERSION: &str = "1";
/// Client versions this server supports.
pub const SUPPORTED_CLIENT_RANGE: &str = "^0.1.2";
/// Header that selects a Workspace by id or slug.
pub const WORKSPACE_HEADER: &str = "svc-workspace";
/// Header in which a client declares its version.
pub const CLIENT_VERSION_HEADER: &str = "svc-client-version";
/// Header in which a client declares where it keeps its credential.
pub const SECRET_LOCATION_HEADER: &str = "svc-secret-location";
/// The body's `idempotencyKey` as a header, as Stripe-style clients send it.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// Header set on the answer to an idempotent replay.
pub const IDEMPOTENT_REPLAYED_HEADER: &str = "idempotent-replayed";
