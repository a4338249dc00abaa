//! Test databases go even when their test fails. `#[sqlx::test]` drops a
//! test's database only when the test passes (it keeps a failed one to look
//! at), so on its own it leaves a failed test's `_sqlx_test_*` database. A test
//! that names its database through this crate's helpers has it dropped by a
//! panic hook when it panics: with `WITH (FORCE)`, since the processes the test
//! started may still be connected.
//!
//! Each test runs on its own thread (`#[sqlx::test]` blocks on a current-thread
//! runtime), so the databases are remembered per thread: a failing test drops
//! its own, never a neighbour's.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static DATABASES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Drops `database` (a `#[sqlx::test]` database) if this thread's test panics.
pub fn drop_on_failure(database: &str) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            let databases = DATABASES.with(|d| std::mem::take(&mut *d.borrow_mut()));
            databases.iter().for_each(|name| drop_database(name));
        }));
    });
    DATABASES.with(|d| d.borrow_mut().push(database.to_owned()));
}

/// `DROP DATABASE ... WITH (FORCE)` on the server of `DATABASE_URL`, and the
/// row sqlx keeps for it; with `psql`, since a panicking test's runtime cannot
/// be used.
fn drop_database(name: &str) {
    let Ok(server) = std::env::var("DATABASE_URL") else { return };
    if !name.starts_with("_sqlx_test") || name.contains(['"', '\'']) {
        return;
    }
    let _ = std::process::Command::new("psql")
        .args([server.as_str(), "-qX", "-v", "ON_ERROR_STOP=0"])
        .args(["-c", &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")])
        .args(["-c", &format!("DELETE FROM _sqlx_test.databases WHERE db_name = '{name}'")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}
