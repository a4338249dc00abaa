//! The checked-in `schemas/` folder must equal what the code generates, and the
//! published digest must be the digest of the published operations.
//!
//! After a deliberate contract change, regenerate with
//! `cargo run -p svc-contract --example write-schemas`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use svc_contract::catalog;
use svc_contract::digest::sha256_jcs;
use svc_contract::files::schema_files;

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

fn checked_in() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for sub in ["", "operations"] {
        let Ok(entries) = std::fs::read_dir(schemas_dir().join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let key = if sub.is_empty() { name.to_owned() } else { format!("{sub}/{name}") };
                files.insert(key, std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    files
}

#[test]
fn schemas_folder_matches_the_code() {
    let generated = schema_files();
    assert_eq!(generated.len(), 2 + 2 * 30);
    let checked_in = checked_in();
    let stale: Vec<&String> = checked_in.keys().filter(|k| !generated.contains_key(*k)).collect();
    let drifted: Vec<&String> =
        generated.iter().filter(|(k, v)| checked_in.get(*k) != Some(v)).map(|(k, _)| k).collect();
    assert!(
        stale.is_empty() && drifted.is_empty(),
        "schemas/ drifted from the code (changed or missing: {drifted:?}; stale: {stale:?}).\n\
         Regenerate with: cargo run -p svc-contract --example write-schemas"
    );
}

/// Clients compare digests: the one published must be the JCS SHA-256 of the
/// operations published beside it, read back from the file.
#[test]
fn the_published_digest_is_that_of_the_published_operations() {
    let text = std::fs::read_to_string(schemas_dir().join("catalog.json")).expect("schemas/catalog.json");
    let published: Value = serde_json::from_str(&text).expect("JSON");
    let digest = published["catalogDigest"].as_str().expect("a digest");
    assert_eq!(digest, sha256_jcs(&published["operations"]));
    assert_eq!(digest, catalog::catalog_digest());
}
