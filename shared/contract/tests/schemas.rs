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

/// Every string path of `schema` (JSON pointers), with the string's schema.
fn strings<'a>(schema: &'a Value, at: String, found: &mut Vec<(String, &'a Value)>) {
    match schema {
        Value::Object(map) => {
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            if is_string {
                found.push((at.clone(), schema));
            }
            for (key, value) in map {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    strings(value, format!("{at}/{key}"), found);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// The server refuses U+0000 in any input text; the schemas say so on every
/// string: the NUL pattern, or a pattern of its own that excludes it (each a
/// whole-text character rule), an enum or a const.
#[test]
fn every_input_string_declares_it_holds_no_nul() {
    use svc_contract::chat::{BRAND_COLOR_PATTERN, ORIGIN_PATTERN, URL_PATTERN};
    use svc_contract::resources::{DIGEST_PATTERN, SLUG_PATTERN};
    use svc_contract::schema::NO_NUL_PATTERN;
    let known = [NO_NUL_PATTERN, SLUG_PATTERN, DIGEST_PATTERN, BRAND_COLOR_PATTERN, URL_PATTERN, ORIGIN_PATTERN];
    for pattern in known {
        let validator = jsonschema::validator_for(&serde_json::json!({ "pattern": pattern })).expect("compiles");
        for text in ["\0", "a\0", "\0a", "https://example.com/\0", "https://example.com\0"] {
            assert!(!validator.is_valid(&Value::from(text)), "{pattern} allows {text:?}");
        }
    }
    let mut undeclared = Vec::new();
    for op in &svc_contract::CATALOG {
        let schema = Value::Object(op.input_schema().clone());
        let mut found = Vec::new();
        strings(&schema, String::new(), &mut found);
        for (path, string) in found {
            let pattern = string.get("pattern").and_then(Value::as_str);
            let ok = string.get("enum").is_some()
                || string.get("const").is_some()
                || pattern.is_some_and(|p| known.contains(&p));
            if !ok {
                undeclared.push(format!("{}{path}", op.id));
            }
        }
    }
    assert!(undeclared.is_empty(), "strings without a NUL rule: {undeclared:?}");
    // And the header a client may send.
    let document = svc_contract::openapi::document();
    assert_eq!(document["components"]["parameters"]["Svc-Workspace"]["schema"]["pattern"], NO_NUL_PATTERN);
}

/// Web addresses are declared as the server checks them: `format: uri` and
/// the URL pattern, at most 2,000 characters; origins with their pattern.
#[test]
fn web_addresses_and_origins_declare_their_rules() {
    use svc_contract::chat::{ORIGIN_PATTERN, URL_PATTERN};
    let input = |id: &str| Value::Object(catalog::by_id(id).expect("an operation").input_schema().clone());
    let enable = input("public_chat.enable");
    let configure = input("widget.configure");
    let verify = input("widget.verify");
    let website = |schema: &Value, pointer: &str| {
        let field = schema.pointer(pointer).unwrap_or_else(|| panic!("{pointer}"));
        assert_eq!(field["format"], "uri", "{pointer}");
        assert_eq!(field["pattern"], URL_PATTERN, "{pointer}");
        assert_eq!((field["minLength"].as_u64(), field["maxLength"].as_u64()), (Some(1), Some(2000)), "{pointer}");
    };
    website(&enable, "/properties/website");
    website(&configure, "/properties/configuration/properties/website");
    let logo = &configure["properties"]["configuration"]["properties"]["appearance"]["properties"]["logoUrl"];
    assert_eq!(logo["anyOf"][1], serde_json::json!({ "format": "uri", "pattern": URL_PATTERN }));
    assert_eq!(logo["maxLength"], 2000);
    for origins in ["allowedOrigins", "confirmRemovedOrigins"] {
        let items = &configure["properties"]["configuration"]["properties"][origins]["items"];
        assert_eq!(items["pattern"], ORIGIN_PATTERN, "{origins}");
    }
    assert_eq!(verify["properties"]["origin"]["pattern"], ORIGIN_PATTERN);
}
