//! Schema fingerprints: canonical JSON of a table description and its SHA-256.
//!
//! Canonical form (keys sorted, no whitespace, columns sorted by name):
//! `{"columns":[{"decl_type_affinity":..,"name":..,"not_null":..,"pk_ordinal":..},..],"table_name":..}`

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use crate::affinity::sqlite_affinity;
use crate::canonical::write_json_str;
use crate::error::CoreError;

/// One column as read from `PRAGMA table_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub name: String,
    /// Declared type; reduced to its affinity (affinity names map to themselves).
    pub declared_type: String,
    /// 0 for non-PK columns, 1..N for the members of the primary key.
    pub pk_ordinal: i64,
    pub not_null: bool,
}

impl ColumnSpec {
    pub fn new(name: &str, declared_type: &str, pk_ordinal: i64, not_null: bool) -> Self {
        ColumnSpec {
            name: name.to_owned(),
            declared_type: declared_type.to_owned(),
            pk_ordinal,
            not_null,
        }
    }
}

/// A table's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Lowercase hex SHA-256 of `canonical_json`.
    pub schema_hash: String,
    pub canonical_json: String,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Fingerprint of a table; [`CoreError::Schema`] if the description is not a table.
pub fn schema_fingerprint(
    table_name: &str,
    columns: &[ColumnSpec],
) -> Result<Fingerprint, CoreError> {
    if table_name.is_empty() {
        return Err(CoreError::Schema("table name is empty".into()));
    }
    if columns.is_empty() {
        return Err(CoreError::Schema(format!(
            "table {table_name:?} has no columns"
        )));
    }
    let mut seen = HashSet::with_capacity(columns.len());
    let mut pk_ordinals = Vec::new();
    for col in columns {
        if col.name.is_empty() {
            return Err(CoreError::Schema(format!(
                "table {table_name:?} has a column with an empty name"
            )));
        }
        if !seen.insert(col.name.as_str()) {
            return Err(CoreError::Schema(format!(
                "table {table_name:?} has duplicate column {:?}",
                col.name
            )));
        }
        if col.pk_ordinal < 0 {
            return Err(CoreError::Schema(format!(
                "column {:?} has negative pk_ordinal {}",
                col.name, col.pk_ordinal
            )));
        }
        if col.pk_ordinal > 0 {
            pk_ordinals.push(col.pk_ordinal);
        }
    }
    pk_ordinals.sort_unstable();
    for (i, ord) in pk_ordinals.iter().enumerate() {
        if *ord != i as i64 + 1 {
            return Err(CoreError::Schema(format!(
                "table {table_name:?} primary-key ordinals {pk_ordinals:?} are not 1..{}",
                pk_ordinals.len()
            )));
        }
    }

    let mut sorted: Vec<&ColumnSpec> = columns.iter().collect();
    sorted.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));

    let mut out = Vec::with_capacity(64 + 96 * columns.len());
    out.extend_from_slice(b"{\"columns\":[");
    for (i, col) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"decl_type_affinity\":\"");
        out.extend_from_slice(sqlite_affinity(&col.declared_type).as_str().as_bytes());
        out.extend_from_slice(b"\",\"name\":");
        write_json_str(&col.name, &mut out);
        out.extend_from_slice(b",\"not_null\":");
        out.extend_from_slice(if col.not_null { b"true" } else { b"false" });
        out.extend_from_slice(b",\"pk_ordinal\":");
        out.extend_from_slice(col.pk_ordinal.to_string().as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"table_name\":");
    write_json_str(table_name, &mut out);
    out.push(b'}');

    let schema_hash = sha256_hex(&out);
    let canonical_json = String::from_utf8(out).expect("canonical JSON is UTF-8");
    Ok(Fingerprint {
        schema_hash,
        canonical_json,
    })
}

/// The same canonical JSON with every character outside printable ASCII
/// (U+0020..U+007E) written as a lowercase `\uXXXX` escape, UTF-16 surrogate pairs
/// above U+FFFF: what Python's `json.dumps(..., sort_keys=True, separators=(",", ":"))`
/// writes with its default `ensure_ascii=True`. None when `canonical_json` has no
/// such character (both spellings are then the same bytes).
///
/// Only string contents can hold such characters (the canonical form is ASCII
/// outside strings, and serde_json already escapes control characters), so escaping
/// them in the whole text escapes exactly the strings.
pub fn ascii_spelling(canonical_json: &str) -> Option<String> {
    if canonical_json.bytes().all(|b| b < 0x7f) {
        return None;
    }
    let mut out = String::with_capacity(canonical_json.len() + 16);
    let mut units = [0u16; 2];
    for c in canonical_json.chars() {
        if (c as u32) < 0x7f {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Some(out)
}

/// Whether `schema_hash` is the fingerprint of `fp`'s table in either spelling of
/// its canonical JSON: UTF-8 as written (the edgesync agent) or ASCII-escaped
/// ([`ascii_spelling`], a third-party agent using Python's `json.dumps` defaults).
pub fn hash_matches(fp: &Fingerprint, schema_hash: &str) -> bool {
    fp.schema_hash == schema_hash
        || ascii_spelling(&fp.canonical_json)
            .is_some_and(|a| sha256_hex(a.as_bytes()) == schema_hash)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::canonical::to_canonical;

    /// `device_state(id INTEGER PRIMARY KEY, mode TEXT, setpoint REAL NOT NULL)`.
    pub(crate) fn device_state() -> Vec<ColumnSpec> {
        vec![
            ColumnSpec::new("id", "INTEGER", 1, false),
            ColumnSpec::new("mode", "TEXT", 0, false),
            ColumnSpec::new("setpoint", "REAL", 0, true),
        ]
    }

    pub(crate) const DEVICE_STATE_JSON: &str = concat!(
        r#"{"columns":["#,
        r#"{"decl_type_affinity":"INTEGER","name":"id","not_null":false,"pk_ordinal":1},"#,
        r#"{"decl_type_affinity":"TEXT","name":"mode","not_null":false,"pk_ordinal":0},"#,
        r#"{"decl_type_affinity":"REAL","name":"setpoint","not_null":true,"pk_ordinal":0}"#,
        r#"],"table_name":"device_state"}"#
    );
    /// Computed independently: `printf '%s' "$JSON" | sha256sum`.
    pub(crate) const DEVICE_STATE_HASH: &str =
        "fb11433b0f7b3151834b13e114332fb1ee31a2333f36376737b962f0c926bada";

    #[test]
    fn fixed_table_json_and_hash() {
        let fp = schema_fingerprint("device_state", &device_state()).unwrap();
        assert_eq!(fp.canonical_json, DEVICE_STATE_JSON);
        assert_eq!(fp.schema_hash, DEVICE_STATE_HASH);
    }

    #[test]
    fn canonical_json_is_sorted_canonical_form() {
        let fp = schema_fingerprint("device_state", &device_state()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&fp.canonical_json).unwrap();
        assert_eq!(to_canonical(&v), fp.canonical_json.as_bytes());
    }

    #[test]
    fn declared_types_reduce_to_affinity() {
        let cols = vec![
            ColumnSpec::new("id", "int", 1, false),
            ColumnSpec::new("mode", "VARCHAR(16)", 0, false),
            ColumnSpec::new("setpoint", "DOUBLE PRECISION", 0, true),
        ];
        let fp = schema_fingerprint("device_state", &cols).unwrap();
        assert_eq!(fp.schema_hash, DEVICE_STATE_HASH);
    }

    #[test]
    fn column_order_does_not_matter() {
        let mut cols = device_state();
        cols.reverse();
        let fp = schema_fingerprint("device_state", &cols).unwrap();
        assert_eq!(fp.schema_hash, DEVICE_STATE_HASH);
        cols.swap(0, 1);
        let fp = schema_fingerprint("device_state", &cols).unwrap();
        assert_eq!(fp.canonical_json, DEVICE_STATE_JSON);
    }

    #[test]
    fn affinity_not_null_pk_and_name_change_hash() {
        let base = schema_fingerprint("device_state", &device_state()).unwrap();
        let mut changes: Vec<(String, Vec<ColumnSpec>)> = Vec::new();
        let mut c = device_state();
        c[2].declared_type = "NUMERIC".into();
        changes.push(("device_state".into(), c));
        let mut c = device_state();
        c[1].not_null = true;
        changes.push(("device_state".into(), c));
        let mut c = device_state();
        c[1].pk_ordinal = 2;
        changes.push(("device_state".into(), c));
        changes.push(("device_state2".into(), device_state()));
        let mut c = device_state();
        c.pop();
        changes.push(("device_state".into(), c));
        for (table, cols) in changes {
            let fp = schema_fingerprint(&table, &cols).unwrap();
            assert_ne!(fp.schema_hash, base.schema_hash, "{cols:?}");
        }
    }

    #[test]
    fn composite_pk_any_order() {
        let cols = vec![
            ColumnSpec::new("b", "TEXT", 1, true),
            ColumnSpec::new("a", "INTEGER", 2, true),
            ColumnSpec::new("c", "", 0, false),
        ];
        let fp = schema_fingerprint("t", &cols).unwrap();
        assert_eq!(
            fp.canonical_json,
            concat!(
                r#"{"columns":[{"decl_type_affinity":"INTEGER","name":"a","not_null":true,"pk_ordinal":2},"#,
                r#"{"decl_type_affinity":"TEXT","name":"b","not_null":true,"pk_ordinal":1},"#,
                r#"{"decl_type_affinity":"BLOB","name":"c","not_null":false,"pk_ordinal":0}],"table_name":"t"}"#
            )
        );
    }

    #[test]
    fn names_are_json_escaped() {
        let cols = vec![ColumnSpec::new("we\"ird\n", "TEXT", 0, false)];
        let fp = schema_fingerprint("t\u{e9}", &cols).unwrap();
        assert!(fp.canonical_json.contains(r#""name":"we\"ird\n""#));
        assert!(fp.canonical_json.ends_with("\"table_name\":\"t\u{e9}\"}"));
    }

    #[test]
    fn rejects_bad_descriptions() {
        let bad: Vec<(&str, Vec<ColumnSpec>)> = vec![
            ("", device_state()),
            ("t", vec![]),
            ("t", vec![ColumnSpec::new("", "TEXT", 0, false)]),
            (
                "t",
                vec![
                    ColumnSpec::new("a", "TEXT", 0, false),
                    ColumnSpec::new("a", "INT", 0, false),
                ],
            ),
            ("t", vec![ColumnSpec::new("a", "TEXT", -1, false)]),
            ("t", vec![ColumnSpec::new("a", "TEXT", 2, false)]),
            (
                "t",
                vec![
                    ColumnSpec::new("a", "TEXT", 1, false),
                    ColumnSpec::new("b", "TEXT", 1, false),
                ],
            ),
            (
                "t",
                vec![
                    ColumnSpec::new("a", "TEXT", 1, false),
                    ColumnSpec::new("b", "TEXT", 3, false),
                ],
            ),
        ];
        for (table, cols) in bad {
            match schema_fingerprint(table, &cols) {
                Err(CoreError::Schema(_)) => {}
                other => panic!("{table:?} {cols:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn ascii_spelling_is_python_json_dumps_default() {
        // Expected text as written by Python 3:
        // json.dumps(obj, sort_keys=True, separators=(",", ":")) with obj the canonical
        // description of table "t\u00e9" with columns "\u6e29\u5ea6" (BMP), "\U0001f600"
        // (astral) and "a\x7fb" (DEL, escaped by Python, not by serde_json).
        let cols = vec![
            ColumnSpec::new("\u{6e29}\u{5ea6}", "REAL", 0, false),
            ColumnSpec::new("\u{1f600}", "TEXT", 0, false),
            ColumnSpec::new("a\u{7f}b", "INTEGER", 1, true),
        ];
        let fp = schema_fingerprint("t\u{e9}", &cols).unwrap();
        let ascii = ascii_spelling(&fp.canonical_json).unwrap();
        assert_eq!(
            ascii,
            concat!(
                r#"{"columns":[{"decl_type_affinity":"INTEGER","name":"a\u007fb","not_null":true,"pk_ordinal":1},"#,
                r#"{"decl_type_affinity":"REAL","name":"\u6e29\u5ea6","not_null":false,"pk_ordinal":0},"#,
                r#"{"decl_type_affinity":"TEXT","name":"\ud83d\ude00","not_null":false,"pk_ordinal":0}],"table_name":"t\u00e9"}"#
            )
        );
        assert!(hash_matches(&fp, &fp.schema_hash));
        assert!(hash_matches(&fp, &sha256_hex(ascii.as_bytes())));
        assert!(!hash_matches(&fp, DEVICE_STATE_HASH));
        let plain = schema_fingerprint("device_state", &device_state()).unwrap();
        assert_eq!(ascii_spelling(&plain.canonical_json), None);
    }

    #[test]
    fn sha256_hex_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
