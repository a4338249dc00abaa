//! RFC 8785 (JCS) canonical JSON and the SHA-256 digests built on it.

use std::fmt::Write;
use std::io;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The JCS canonical form of `value`: sorted keys, no white space, ES6 numbers.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail, and the output is UTF-8 (JSON of a Value).
    let _ = write_canonical(value, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// `sha256:` and the lower-case hex SHA-256 of `bytes`.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// `sha256:` and the hex SHA-256 of the canonical form of `value`.
pub fn sha256_jcs(value: &Value) -> String {
    let mut hasher = Sha256::new();
    let _ = write_canonical(value, &mut hasher);
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Writes the JCS canonical form of `value` to `out` as it goes: nothing is
/// copied, so hashing a large input costs no memory beyond the hasher.
pub fn write_canonical(value: &Value, out: &mut impl io::Write) -> io::Result<()> {
    match value {
        Value::Null => out.write_all(b"null"),
        Value::Bool(true) => out.write_all(b"true"),
        Value::Bool(false) => out.write_all(b"false"),
        // serde_json escapes strings exactly as JCS requires: `"`, `\`, the
        // short escapes, other control characters as lower-case `\u00xx`.
        Value::String(text) => serde_json::to_writer(&mut *out, text).map_err(io::Error::other),
        // JCS numbers are IEEE 754 doubles written as ES6 does (RFC 8785
        // §3.2.2.3): an integer beyond 2^53 is written as the double it rounds to.
        Value::Number(number) => match number.as_f64() {
            Some(f) if f.is_finite() => out.write_all(es6_number(f).as_bytes()),
            _ => out.write_all(b"null"),
        },
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(item, out)?;
            }
            out.write_all(b"]")
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // JCS orders keys by their UTF-16 code units.
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.write_all(b"{")?;
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, key).map_err(io::Error::other)?;
                out.write_all(b":")?;
                write_canonical(item, out)?;
            }
            out.write_all(b"}")
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
            (9_007_199_254_740_992.0, "9007199254740992"),
        ];
        for (input, expected) in cases {
            assert_eq!(canonical_json(&json!(input)), expected, "{input}");
        }
    }

    /// Integers are doubles in JCS: beyond 2^53 they are written as the double
    /// they round to, and from 1e21 in exponent form (RFC 8785 §3.2.2.3).
    #[test]
    fn large_integers_are_written_as_doubles() {
        assert_eq!(canonical_json(&json!(9_007_199_254_740_993_u64)), "9007199254740992");
        assert_eq!(canonical_json(&json!(-9_007_199_254_740_993_i64)), "-9007199254740992");
        assert_eq!(canonical_json(&json!(u64::MAX)), "18446744073709552000");
        assert_eq!(canonical_json(&json!(123_456_789_012_u64)), "123456789012");
        assert_eq!(canonical_json(&json!([1, -1, 0])), "[1,-1,0]");
    }

    #[test]
    fn hashing_streams_the_same_bytes() {
        let value = json!({"b": "x\u{1}\"", "a": [1.5, null, true], "€": {}});
        assert_eq!(sha256_jcs(&value), sha256_prefixed(canonical_json(&value).as_bytes()));
        assert_eq!(canonical_json(&value), r#"{"a":[1.5,null,true],"b":"x\u0001\"","€":{}}"#);
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
