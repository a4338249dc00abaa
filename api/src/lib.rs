//! `svc-api`: the surfaces of svc. HTTP operations, MCP, discovery, health and
//! metrics, plus the operator commands. No business rules live here: every
//! request becomes a call into `svc-core`.

pub mod access;
pub mod account;
pub mod admin;
pub mod app;
pub mod body;
pub mod config;
pub mod devidp;
pub mod discovery;
pub mod guard;
pub mod health;
pub mod html;
pub mod keepalive;
pub mod limit;
pub mod mcp;
pub mod metrics;
pub mod operations;
pub mod public;
pub mod resource_metadata;
pub mod response;

pub use app::{App, AppState, router};
pub use config::ServeConfig;
