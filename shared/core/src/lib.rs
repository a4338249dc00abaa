//! `svc-core`: the domain behind the contract.
//!
//! The call path every surface uses ([`Service::authenticate`] then
//! [`Service::call`]), the operation handlers, the store (all SQL), idempotency
//! and entitlements.

pub mod account;
pub mod admin;
pub mod answers;
pub mod auth;
pub mod breaker;
pub mod call;
pub mod caller;
pub mod chat;
pub mod config;
pub mod cursor;
pub mod embeddings;
pub mod entitlements;
pub mod error;
pub mod faults;
pub mod gates;
pub mod housekeeping;
pub mod https;
pub mod idempotency;
pub use svc_ids as ids;
pub mod jobs;
pub mod knowledge;
pub mod lease;
pub mod listen_cache;
pub mod listening;
pub mod metrics;
pub mod openai;
mod ops;
pub mod reconcile;
pub mod retry;
pub mod runtime;
pub mod service;
pub mod slug;
pub mod store;
pub mod timestamp;

pub use call::{ClientHints, Reply};
pub use caller::Caller;
pub use config::{CoreConfig, JwksSource, OidcConfig};
pub use service::Service;
