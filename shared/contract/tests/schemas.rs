//! The checked-in `schemas/` folder must equal what the code generates.
//!
//! After a deliberate contract change, regenerate with
//! `SVC_UPDATE_SCHEMAS=1 cargo test -p svc-contract --test schemas`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use svc_contract::{CATALOG, catalog, openapi};

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    text.push('\n');
    text
}

/// Every generated file, by its path below `schemas/`.
fn generated() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    files.insert("catalog.json".to_owned(), pretty(&catalog::document()));
    files.insert("openapi.json".to_owned(), pretty(&openapi::document()));
    for op in &CATALOG {
        let input = Value::Object(op.input_schema().clone());
        let output = Value::Object(op.output_schema().clone());
        files.insert(format!("operations/{}.input.json", op.id), pretty(&input));
        files.insert(format!("operations/{}.output.json", op.id), pretty(&output));
    }
    files
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
    let generated = generated();
    if std::env::var_os("SVC_UPDATE_SCHEMAS").is_some() {
        let dir = schemas_dir();
        let _ = std::fs::remove_dir_all(dir.join("operations"));
        std::fs::create_dir_all(dir.join("operations")).expect("create schemas/operations");
        for (name, text) in &generated {
            std::fs::write(dir.join(name), text).expect("write schema file");
        }
        return;
    }
    let checked_in = checked_in();
    let stale: Vec<&String> = checked_in.keys().filter(|k| !generated.contains_key(*k)).collect();
    let drifted: Vec<&String> =
        generated.iter().filter(|(k, v)| checked_in.get(*k) != Some(v)).map(|(k, _)| k).collect();
    assert!(
        stale.is_empty() && drifted.is_empty(),
        "schemas/ drifted from the code (changed or missing: {drifted:?}; stale: {stale:?}).\n\
         Regenerate with: SVC_UPDATE_SCHEMAS=1 cargo test -p svc-contract --test schemas"
    );
    assert_eq!(generated.len(), 2 + 2 * 30);
}
