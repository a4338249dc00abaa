//! API tests: the real router, in-process, over a fresh PostgreSQL database per
//! test (`#[sqlx::test]`), so they run in parallel.

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]
#![allow(clippy::disallowed_methods, reason = "tests take pooled connections in place; their futures' size is no cost")]

mod account;
mod account_members;
mod agents;
mod answers;
mod api_keys;
mod callers;
mod catalog;
mod chat;
mod devidp;
mod faults;
mod hardening;
mod helpers;
mod http;
mod idempotency;
mod identity;
mod index;
mod knowledge;
mod mcp;
mod meaning;
mod migrations;
mod public;
mod reconcile;
mod resource_metadata;
mod revision_states;
mod statistics;
mod turns;
mod usage;
mod warm;
mod widget_public;
mod workspaces;
