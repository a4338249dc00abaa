//! The generated files of the checked-in `schemas/` folder, by path: the
//! catalog, the OpenAPI document, and an input and an output schema per
//! operation. Pure: writing them is `cargo run -p svc-contract --example
//! write-schemas`, and a test fails while the folder differs.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{CATALOG, catalog, openapi};

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Every generated file, by its path below `schemas/`.
pub fn schema_files() -> BTreeMap<String, String> {
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
