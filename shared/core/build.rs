//! The migrations are embedded at compile time (`sqlx::migrate!`): a new or
//! changed file must rebuild the crate, which cargo does not see by itself.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
