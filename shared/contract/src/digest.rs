//! RFC 8785 (JCS) canonical JSON and the SHA-256 digests built on it.

use std::fmt::Write;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The JCS canonical form of `value`: sorted keys, no white space, ES6 numbers.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// `sha256:` and the lower-case hex SHA-256 of `bytes`.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// `sha256:` and the hex SHA-256 of the canonical form of `value`.
pub fn sha256_jcs(value: &Value) -> String {
    sha256_prefixed(canonical_json(value).as_bytes())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => {
            // serde_json escapes strings exactly as JCS requires: `"`, `\`, the
            // short escapes, other control characters as lower-case `\u00xx`.
            out.push_str(&value.to_string());
        }
        Value::Number(number) => match (number.as_i64(), number.as_u64(), number.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (None, None, Some(f)) => out.push_str(&es6_number(f)),
            (None, None, None) => out.push_str("null"),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // JCS orders keys by their UTF-16 code units.
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

/// ECMAScript's `Number.prototype.toString` for a finite double.
fn es6_number(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let magnitude = f.abs();
    if (1e-6..1e21).contains(&magnitude) {
        // Rust's shortest round-trip decimal form matches ES6 in this range.
        let text = format!("{f}");
        text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
    } else {
        let text = format!("{f:e}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_drops_white_space() {
        let value = json!({"b": [1, {"d": true, "c": null}], "a": "x"});
        assert_eq!(canonical_json(&value), r#"{"a":"x","b":[1,{"c":null,"d":true}]}"#);
    }

    /// Number examples from RFC 8785 appendix B.
    #[test]
    fn numbers_follow_es6() {
        let cases = [
            // RFC 8785 writes this input as 333333333.33333329.
            (333_333_333.333_333_3_f64, "333333333.3333333"),
            (1e30, "1e+30"),
            (4.50, "4.5"),
            (2e-3, "0.002"),
            (0.000000000000000000000000001, "1e-27"),
            (2.0, "2"),
            (-0.0, "0"),
        ];
        for (input, expected) in cases {
            assert_eq!(canonical_json(&json!(input)), expected, "{input}");
        }
    }

    /// String and key-order example from RFC 8785 section 3.2.3.
    #[test]
    fn strings_and_utf16_key_order() {
        let value = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{0080}": "Control",
            "\u{00f6}": "Latin Small Letter O With Diaeresis"
        });
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{0080}\":\"Control\",\"\u{00f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical_json(&value), expected);
        assert_eq!(canonical_json(&json!("\u{1f}\u{7f}")), "\"\\u001f\u{7f}\"");
    }

    #[test]
    fn digest_format() {
        let digest = sha256_prefixed(b"");
        assert_eq!(digest, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
