//! API tests: the real router, in-process, over a fresh PostgreSQL database per
//! test (`#[sqlx::test]`), so they run in parallel.

mod helpers;
mod identity;
