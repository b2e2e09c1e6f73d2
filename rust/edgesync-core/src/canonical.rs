//! Canonical JSON: object keys sorted by byte order at every level, no
//! whitespace, strings escaped exactly as serde_json escapes them.

use serde_json::Value;

/// Appends the canonical form of `value` to `out`.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(key, out);
                out.push(b':');
                write_canonical(val, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => {
            // Writing a scalar to a Vec cannot fail.
            serde_json::to_writer(&mut *out, scalar).expect("scalar JSON serialization");
        }
    }
}

/// Canonical form of `value` as bytes.
pub fn to_canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    out
}

/// Appends `s` as a JSON string literal (serde_json escaping).
pub fn write_json_str(s: &str, out: &mut Vec<u8>) {
    if s.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\') {
        // Nothing to escape: serde_json would write the bytes as they are.
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    serde_json::to_writer(&mut *out, s).expect("string JSON serialization");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_level_without_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": 1, "a": {"z": [ {"y":2, "x":1} ], "c": null} }"#)
                .unwrap();
        assert_eq!(
            String::from_utf8(to_canonical(&v)).unwrap(),
            r#"{"a":{"c":null,"z":[{"x":1,"y":2}]},"b":1}"#
        );
    }

    #[test]
    fn byte_order_not_locale_order() {
        let v = json!({"a": 1, "B": 2, "é": 3, "_": 4});
        assert_eq!(
            String::from_utf8(to_canonical(&v)).unwrap(),
            r#"{"B":2,"_":4,"a":1,"é":3}"#
        );
    }

    #[test]
    fn escapes_like_serde_json() {
        let v = json!({"k\"\n": "tab\there\u{1}", "n": 1.5, "t": true});
        assert_eq!(
            String::from_utf8(to_canonical(&v)).unwrap(),
            r#"{"k\"\n":"tab\there\u0001","n":1.5,"t":true}"#
        );
    }
}
