//! Writes the API reference, `docs/api-reference.md`, from the operation catalog:
//! `cargo run -p svc-contract --example api-reference`.
//!
//! Each operation's section comes from its catalog entry and its JSON Schemas;
//! nothing here is written for one operation, so the reference cannot say what
//! the catalog does not. The only text kept by hand is the framing (how to call
//! any operation, contract §1, §4, §7, §13, §14) and the meaning of each problem
//! code, quoted from the spec.
//!
//! It is an example of the contract crate, not a module of it, so that no
//! binary links the generator. Its tests run with the workspace's
//! (`test = true` in the crate's manifest), and `current` fails while the
//! checked-in file differs from what this writes.

mod markdown;
mod meanings;
mod operation;
mod page;
mod schema;

#[cfg(test)]
mod current;

use std::path::{Path, PathBuf};

/// Where the reference lives, from the repository root.
const PATH: &str = "docs/api-reference.md";

/// The command that rewrites [`PATH`] from the catalog: this program.
const UPDATE_COMMAND: &str = "cargo run -p svc-contract --example api-reference";

/// The repository's root, from the contract crate's folder.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() -> std::io::Result<()> {
    let path = repository().join(PATH);
    std::fs::write(&path, page::markdown())?;
    println!("wrote {PATH}");
    Ok(())
}
