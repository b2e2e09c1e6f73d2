//! `source_pk_hash`: SHA-256 of the canonical JSON of a row's `pk` object.

use serde_json::{Map, Value};

use crate::canonical::write_canonical;
use crate::envelope::parse_json;
use crate::error::CoreError;
use crate::fingerprint::sha256_hex;
use crate::rejection::RejectionCode;

/// Lowercase hex SHA-256 of the canonical JSON (sorted keys, no whitespace) of `pk`.
pub fn pk_hash(pk: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(64);
    out.push(b'{');
    let mut entries: Vec<(&String, &Value)> = pk.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (i, (key, val)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        crate::canonical::write_json_str(key, &mut out);
        out.push(b':');
        write_canonical(val, &mut out);
    }
    out.push(b'}');
    sha256_hex(&out)
}

/// [`pk_hash`] of a JSON document that must be a non-empty object.
///
/// Errors are [`CoreError::Rejected`] with the envelope's codes
/// (`malformed_json`, `invalid_number_encoding`) or `invalid_row` (field `pk`)
/// when the document is not a non-empty object.
pub fn pk_hash_json(bytes: &[u8]) -> Result<String, CoreError> {
    match parse_json(bytes)? {
        Value::Object(map) if !map.is_empty() => Ok(pk_hash(&map)),
        _ => Err(CoreError::rejected(
            RejectionCode::InvalidRow,
            Some("pk".into()),
            "pk must be a non-empty JSON object",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn known_hash() {
        // printf '%s' '{"id":1}' | sha256sum
        assert_eq!(
            pk_hash(&obj(json!({"id": 1}))),
            "037c9214eef74cc3887f3a4f085b4e17d76280dafd273b0ee160c09c4ba1cfd4"
        );
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = pk_hash_json(br#"{"site": "x", "id": 7}"#).unwrap();
        let b = pk_hash_json(br#"{"id":7,"site":"x"}"#).unwrap();
        assert_eq!(a, b);
        // printf '%s' '{"id":7,"site":"x"}' | sha256sum
        assert_eq!(
            a,
            "db5c76fae056a02b1751b2e9fc5ab2b840e0c8910e6b4db300f331bb95d9d09b"
        );
    }

    #[test]
    fn value_types_matter() {
        assert_ne!(
            pk_hash_json(br#"{"id":1}"#).unwrap(),
            pk_hash_json(br#"{"id":"1"}"#).unwrap()
        );
    }

    #[test]
    fn rejects_non_objects() {
        for bad in [&b"[]"[..], b"{}", b"1", b"null", b"{", b"\xff"] {
            assert!(pk_hash_json(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            pk_hash_json(b"{\"id\":NaN}").unwrap_err().code(),
            Some(RejectionCode::InvalidNumberEncoding)
        );
    }
}
