//! The tests embed the migrations at compile time (`#[sqlx::test(migrations)]`):
//! a new or changed file must rebuild them, which cargo does not see by itself.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
