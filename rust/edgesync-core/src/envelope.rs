//! The envelope shared by `sync/rows/batch` and `sync/telemetry/batch`.
//!
//! Each batch decoder ([`crate::row_batch`], [`crate::telemetry`]) runs these
//! checks in its documented order; all of them report a
//! [`CoreError::Rejected`] whose `code` is a protocol rejection code and never
//! panic.

use serde_json::{Map, Value};

use crate::affinity::Affinity;
use crate::error::CoreError;
use crate::fingerprint::{
    ascii_spelling, hash_matches, schema_fingerprint, sha256_hex, ColumnSpec,
};
use crate::rawjson::{parse_top, RowSink, RowsShape};
use crate::rejection::RejectionCode;

/// Largest accepted payload, in bytes (512 KiB).
pub const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Largest number of rows in one batch.
pub const MAX_BATCH_ROWS: usize = 4096;
/// The one `format_version` understood.
pub const SUPPORTED_FORMAT_VERSION: i64 = 1;

/// The envelope fields every validated batch carries, rows or telemetry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub format_version: i64,
    pub capture_strategy: String,
    /// Lower-case UUIDv7.
    pub batch_id: String,
    pub source_table: String,
    pub schema_hash: String,
    /// Canonical JSON of `schema_columns` (the fingerprint input), when present.
    pub schema_columns_json: Option<String>,
    /// Size of the payload in bytes.
    pub payload_size: usize,
    /// `first_seen_at_ms` (optional extension, docs/protocol.md): Unix milliseconds at
    /// which the agent first saw the batch's oldest change; None when absent or not an
    /// integer in 0..2^53 (a freshness hint never refuses a batch).
    pub first_seen_at_ms: Option<i64>,
}

/// The optional `first_seen_at_ms` of an envelope (see [`Envelope::first_seen_at_ms`]).
pub(crate) fn first_seen_at_ms(top: &Map<String, Value>) -> Option<i64> {
    top.get("first_seen_at_ms")
        .and_then(Value::as_i64)
        .filter(|ms| (0..1_i64 << 53).contains(ms))
}

pub(crate) const TENANT_FIELDS: [&str; 4] = ["device_id", "org_id", "project_id", "fleet_id"];
const MAX_SOURCE_TABLE_BYTES: usize = 255;

pub(crate) fn reject(
    code: RejectionCode,
    field: impl Into<Option<String>>,
    detail: impl Into<String>,
) -> CoreError {
    CoreError::rejected(code, field.into(), detail)
}

/// Classifies a JSON parse error as `malformed_json` or
/// `invalid_number_encoding` (NaN, Infinity, numbers overflowing f64).
fn classify_parse_error(text: &str, e: &serde_json::Error) -> CoreError {
    let msg = e.to_string();
    if msg.starts_with("number out of range") || has_non_finite_token(text) {
        reject(
            RejectionCode::InvalidNumberEncoding,
            None,
            format!("non-finite number (NaN/Infinity or out of f64 range): {msg}"),
        )
    } else {
        reject(
            RejectionCode::MalformedJson,
            None,
            format!("invalid JSON: {msg}"),
        )
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, CoreError> {
    std::str::from_utf8(bytes).map_err(|e| {
        reject(
            RejectionCode::MalformedJson,
            None,
            format!("payload is not UTF-8: {e}"),
        )
    })
}

/// Parses a JSON document, classifying failures as `malformed_json` or
/// `invalid_number_encoding` (NaN, Infinity, numbers overflowing f64).
pub fn parse_json(bytes: &[u8]) -> Result<Value, CoreError> {
    let text = utf8(bytes)?;
    serde_json::from_str::<Value>(text).map_err(|e| classify_parse_error(text, &e))
}

/// A payload parsed in one pass: the envelope fields and the shape of `rows`
/// (whose elements went to the sink).
pub(crate) struct Parsed<'a> {
    pub text: &'a str,
    pub top: Map<String, Value>,
    pub rows: Option<RowsShape>,
}

/// Size limit, UTF-8, JSON syntax and number encoding, object at the top;
/// `sink` (made from the payload text) receives the rows.
pub(crate) fn parse_payload<'a, S: RowSink<'a>>(
    payload: &'a [u8],
    max_bytes: usize,
    sink: impl FnOnce(&'a str) -> S,
) -> Result<(Parsed<'a>, S), CoreError> {
    if payload.len() > max_bytes {
        return Err(reject(
            RejectionCode::PayloadTooLarge,
            None,
            format!(
                "payload is {} bytes; the limit is {max_bytes}",
                payload.len()
            ),
        ));
    }
    let text = utf8(payload)?;
    let mut sink = sink(text);
    match parse_top(text, &mut sink) {
        Err(e) => Err(classify_parse_error(text, &e)),
        Ok(Err(kind)) => Err(reject(
            RejectionCode::MalformedJson,
            None,
            format!("payload must be a JSON object, got {kind}"),
        )),
        Ok(Ok(doc)) => Ok((
            Parsed {
                text,
                top: doc.fields,
                rows: doc.rows,
            },
            sink,
        )),
    }
}

/// True if a bare `NaN`, `Infinity` or `Inf` token (any case, any sign)
/// appears outside JSON strings.
pub(crate) fn has_non_finite_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
        } else if b.is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            let word = &text[start..i];
            if ["nan", "infinity", "inf"]
                .iter()
                .any(|w| word.eq_ignore_ascii_case(w))
            {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

/// Validates a hyphenated UUID with version 7 and the RFC 4122 variant;
/// returns it lower-cased.
pub fn normalize_uuid_v7(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if !is_hyphenated_uuid(b) {
        return None;
    }
    if b[14] != b'7' || !matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B') {
        return None;
    }
    Some(s.to_ascii_lowercase())
}

/// True for a hyphenated UUID string (`8-4-4-4-12` hex digits, any version).
pub fn is_uuid(s: &str) -> bool {
    is_hyphenated_uuid(s.as_bytes())
}

/// True for `8-4-4-4-12` hex digits (any version and variant).
pub(crate) fn is_hyphenated_uuid(b: &[u8]) -> bool {
    // Table-driven over a fixed 36 bytes, no branch per byte: every telemetry
    // row has a `row_id` to check.
    const HEX: u8 = 1;
    const DASH: u8 = 2;
    const CLASS: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut c = 0;
        while c < 256 {
            t[c] = match c as u8 {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => HEX,
                b'-' => DASH,
                _ => 0,
            };
            c += 1;
        }
        t
    };
    const SHAPE: [u8; 36] = {
        let mut t = [HEX; 36];
        t[8] = DASH;
        t[13] = DASH;
        t[18] = DASH;
        t[23] = DASH;
        t
    };
    let Ok(b) = <&[u8; 36]>::try_from(b) else {
        return false;
    };
    b.iter()
        .zip(SHAPE)
        .fold(true, |ok, (&c, want)| ok & (CLASS[usize::from(c)] == want))
}

fn is_lower_hex_64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(crate) fn describe(v: Option<&Value>) -> String {
    match v {
        None => "nothing (missing)".to_owned(),
        Some(Value::String(s)) if s.len() <= 80 => format!("{s:?}"),
        Some(v) => type_name(v).to_owned(),
    }
}

/// Like [`describe`], but numbers are shown as written.
pub(crate) fn describe_number(v: Option<&Value>) -> String {
    match v {
        Some(v @ Value::Number(_)) => v.to_string(),
        other => describe(other),
    }
}

/// `envelope_unstripped_tenant_fields`.
pub(crate) fn check_tenant_fields(top: &Map<String, Value>) -> Result<(), CoreError> {
    match TENANT_FIELDS.iter().find(|k| top.contains_key(**k)) {
        Some(key) => Err(reject(
            RejectionCode::EnvelopeUnstrippedTenantFields,
            Some((*key).to_owned()),
            format!("tenant field {key:?} must not appear in device payloads"),
        )),
        None => Ok(()),
    }
}

/// `invalid_format_version` / `unsupported_format_version`.
pub(crate) fn format_version(top: &Map<String, Value>) -> Result<i64, CoreError> {
    let field = || Some("format_version".to_owned());
    let Some(v) = top.get("format_version") else {
        return Err(reject(
            RejectionCode::InvalidFormatVersion,
            field(),
            "format_version is missing",
        ));
    };
    match (v.as_i64(), v.as_u64()) {
        (Some(n), _) if n < 1 => Err(reject(
            RejectionCode::InvalidFormatVersion,
            field(),
            format!("format_version must be >= 1, got {n}"),
        )),
        (Some(n), _) if n == SUPPORTED_FORMAT_VERSION => Ok(n),
        (Some(_), _) | (None, Some(_)) => Err(reject(
            RejectionCode::UnsupportedFormatVersion,
            field(),
            format!(
                "format_version {v} is not supported (this build understands {SUPPORTED_FORMAT_VERSION})"
            ),
        )),
        (None, None) => Err(reject(
            RejectionCode::InvalidFormatVersion,
            field(),
            format!("format_version must be an integer, got {}", type_name(v)),
        )),
    }
}

/// `unsupported_capture_strategy` unless it is `expected`.
pub(crate) fn capture_strategy(
    top: &Map<String, Value>,
    expected: &'static str,
) -> Result<String, CoreError> {
    match top.get("capture_strategy") {
        Some(Value::String(s)) if s == expected => Ok(expected.to_owned()),
        other => Err(reject(
            RejectionCode::UnsupportedCaptureStrategy,
            Some("capture_strategy".into()),
            format!(
                "capture_strategy must be {expected:?}, got {}",
                describe(other)
            ),
        )),
    }
}

/// A UUIDv7 field, lower-cased; `code` when missing or invalid.
pub(crate) fn uuid_field(
    top: &Map<String, Value>,
    key: &str,
    code: RejectionCode,
) -> Result<String, CoreError> {
    match top.get(key) {
        Some(Value::String(s)) => normalize_uuid_v7(s),
        _ => None,
    }
    .ok_or_else(|| {
        reject(
            code,
            Some(key.to_owned()),
            format!(
                "{key} must be a hyphenated UUIDv7 string, got {}",
                describe(top.get(key))
            ),
        )
    })
}

/// `invalid_source_table`.
pub(crate) fn source_table(top: &Map<String, Value>) -> Result<String, CoreError> {
    match top.get("source_table") {
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= MAX_SOURCE_TABLE_BYTES && !s.contains('\0') =>
        {
            Ok(s.clone())
        }
        other => Err(reject(
            RejectionCode::InvalidSourceTable,
            Some("source_table".into()),
            format!(
                "source_table must be a non-empty string of at most {MAX_SOURCE_TABLE_BYTES} bytes without NUL, got {}",
                describe(other)
            ),
        )),
    }
}

/// `invalid_schema_hash`.
pub(crate) fn schema_hash(top: &Map<String, Value>) -> Result<String, CoreError> {
    match top.get("schema_hash") {
        Some(Value::String(s)) if is_lower_hex_64(s) => Ok(s.clone()),
        other => Err(reject(
            RejectionCode::InvalidSchemaHash,
            Some("schema_hash".into()),
            format!(
                "schema_hash must be 64 lowercase hex characters, got {}",
                describe(other)
            ),
        )),
    }
}

/// `invalid_rows` (missing, not an array, empty) / `batch_too_many_rows`;
/// the number of rows.
pub(crate) fn rows_count(rows: Option<RowsShape>) -> Result<usize, CoreError> {
    let n = match rows {
        Some(RowsShape::Array(n)) => n,
        other => {
            let other = match other {
                Some(RowsShape::Other(v)) => Some(v),
                _ => None,
            };
            return Err(reject(
                RejectionCode::InvalidRows,
                Some("rows".into()),
                format!("rows must be an array, got {}", describe(other.as_ref())),
            ));
        }
    };
    if n > MAX_BATCH_ROWS {
        return Err(reject(
            RejectionCode::BatchTooManyRows,
            Some("rows".into()),
            format!("batch carries {n} rows; the limit is {MAX_BATCH_ROWS}"),
        ));
    }
    if n == 0 {
        return Err(reject(
            RejectionCode::InvalidRows,
            Some("rows".into()),
            "rows is empty",
        ));
    }
    Ok(n)
}

/// `invalid_schema_columns` / `schema_hash_mismatch`: the canonical JSON of
/// `schema_columns` when present (and not null).
pub(crate) fn schema_columns(
    top: &Map<String, Value>,
    source_table: &str,
    schema_hash: &str,
) -> Result<Option<String>, CoreError> {
    match top.get("schema_columns") {
        None | Some(Value::Null) => Ok(None),
        Some(sc) => schema_columns_canonical(sc, source_table, schema_hash).map(Some),
    }
}

/// Validates `schema_columns` and returns its canonical JSON (the fingerprint input).
fn schema_columns_canonical(
    sc: &Value,
    source_table: &str,
    schema_hash: &str,
) -> Result<String, CoreError> {
    let bad = |field: String, detail: String| {
        reject(RejectionCode::InvalidSchemaColumns, Some(field), detail)
    };
    let obj = sc.as_object().ok_or_else(|| {
        bad(
            "schema_columns".into(),
            format!("schema_columns must be an object, got {}", type_name(sc)),
        )
    })?;
    if let Some(key) = obj.keys().find(|k| *k != "table_name" && *k != "columns") {
        return Err(bad(
            format!("schema_columns.{key}"),
            format!("unexpected key {key:?} in schema_columns"),
        ));
    }
    match obj.get("table_name") {
        Some(Value::String(t)) if t == source_table => {}
        other => {
            return Err(bad(
                "schema_columns.table_name".into(),
                format!(
                    "schema_columns.table_name must equal source_table {source_table:?}, got {}",
                    describe(other)
                ),
            ))
        }
    }
    let cols = match obj.get("columns") {
        Some(Value::Array(cols)) => cols,
        other => {
            return Err(bad(
                "schema_columns.columns".into(),
                format!("columns must be an array, got {}", describe(other)),
            ))
        }
    };
    let mut specs = Vec::with_capacity(cols.len());
    for (i, col) in cols.iter().enumerate() {
        let at = |k: &str| format!("schema_columns.columns[{i}]{k}");
        let col = col.as_object().ok_or_else(|| {
            bad(
                at(""),
                format!("column must be an object, got {}", type_name(col)),
            )
        })?;
        if let Some(key) = col.keys().find(|k| {
            !matches!(
                k.as_str(),
                "name" | "decl_type_affinity" | "pk_ordinal" | "not_null"
            )
        }) {
            return Err(bad(
                at(&format!(".{key}")),
                format!("unexpected key {key:?}"),
            ));
        }
        let name = match col.get("name") {
            Some(Value::String(s)) => s,
            other => {
                return Err(bad(
                    at(".name"),
                    format!("name must be a string, got {}", describe(other)),
                ))
            }
        };
        // PostgreSQL text (the ledger, reviews, target columns) cannot hold NUL.
        if name.contains('\0') {
            return Err(bad(
                at(".name"),
                format!(
                    "column name must not contain NUL, got {}",
                    describe(col.get("name"))
                ),
            ));
        }
        let affinity = match col.get("decl_type_affinity") {
            Some(Value::String(s)) => Affinity::from_name(s),
            _ => None,
        }
        .ok_or_else(|| {
            bad(
                at(".decl_type_affinity"),
                format!(
                    "decl_type_affinity must be one of INTEGER, TEXT, BLOB, REAL, NUMERIC, got {}",
                    describe(col.get("decl_type_affinity"))
                ),
            )
        })?;
        let pk_ordinal = match col.get("pk_ordinal").and_then(Value::as_i64) {
            Some(n) if n >= 0 => n,
            _ => {
                return Err(bad(
                    at(".pk_ordinal"),
                    "pk_ordinal must be an integer >= 0".into(),
                ))
            }
        };
        let not_null = match col.get("not_null") {
            Some(Value::Bool(b)) => *b,
            other => {
                return Err(bad(
                    at(".not_null"),
                    format!("not_null must be a boolean, got {}", describe(other)),
                ))
            }
        };
        specs.push(ColumnSpec {
            name: name.clone(),
            declared_type: affinity.as_str().to_owned(),
            pk_ordinal,
            not_null,
        });
    }
    let fp = schema_fingerprint(source_table, &specs).map_err(|e| match e {
        CoreError::Schema(msg) => bad("schema_columns.columns".into(), msg),
        other => other,
    })?;
    if !hash_matches(&fp, schema_hash) {
        let ascii = ascii_spelling(&fp.canonical_json)
            .map(|a| format!(" or, ASCII-escaped, {}", sha256_hex(a.as_bytes())))
            .unwrap_or_default();
        return Err(reject(
            RejectionCode::SchemaHashMismatch,
            Some("schema_hash".into()),
            format!(
                "schema_hash {schema_hash} does not match the fingerprint of schema_columns \
                 (SHA-256 of its canonical JSON, UTF-8: {}{ascii})",
                fp.schema_hash
            ),
        ));
    }
    Ok(fp.canonical_json)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fingerprint::schema_fingerprint;
    use crate::row_batch::{decode_row_batch, Op, RowBatch};
    use serde_json::json;

    pub(crate) const BATCH_ID: &str = "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a";
    pub(crate) const EPOCH: &str = "019693d0-0000-7000-8000-000000000001";

    pub(crate) fn device_state_hash() -> String {
        schema_fingerprint(
            "device_state",
            &[
                ColumnSpec::new("id", "INTEGER", 1, false),
                ColumnSpec::new("mode", "TEXT", 0, false),
                ColumnSpec::new("setpoint", "REAL", 0, true),
            ],
        )
        .unwrap()
        .schema_hash
    }

    pub(crate) fn valid() -> Value {
        json!({
            "format_version": 1,
            "capture_strategy": "sqlite_row_batch_v1",
            "batch_id": BATCH_ID,
            "journal_epoch": EPOCH,
            "source_table": "device_state",
            "schema_hash": device_state_hash(),
            "schema_columns": {
                "table_name": "device_state",
                "columns": [
                    {"name": "id", "decl_type_affinity": "INTEGER", "pk_ordinal": 1, "not_null": false},
                    {"name": "mode", "decl_type_affinity": "TEXT", "pk_ordinal": 0, "not_null": false},
                    {"name": "setpoint", "decl_type_affinity": "REAL", "pk_ordinal": 0, "not_null": true}
                ]
            },
            "first_commit_seq": 101,
            "last_commit_seq": 103,
            "rows": [
                {"commit_seq": 101, "op": "insert", "pk": {"id": 1},
                 "row": {"id": 1, "mode": "cooling", "setpoint": 21}},
                {"commit_seq": 102, "op": "update", "pk": {"id": 1},
                 "row": {"id": 1, "mode": "heating", "setpoint": 22.5, "extra": null}},
                {"commit_seq": 103, "op": "delete", "pk": {"id": 1}, "row": null}
            ]
        })
    }

    fn bytes(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    fn decode(v: &Value) -> Result<RowBatch, CoreError> {
        decode_row_batch(&bytes(v))
    }

    fn code_field(r: Result<RowBatch, CoreError>) -> (&'static str, Option<String>) {
        match r {
            Err(CoreError::Rejected { code, field, .. }) => (code.as_str(), field),
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    type Mutation = Box<dyn Fn(&mut Map<String, Value>)>;

    fn with(f: impl FnOnce(&mut Map<String, Value>)) -> Value {
        let mut v = valid();
        f(v.as_object_mut().unwrap());
        v
    }

    fn expect(v: Value, code: &str, field: Option<&str>) {
        let (c, f) = code_field(decode(&v));
        assert_eq!(c, code, "payload {v}");
        assert_eq!(f.as_deref(), field, "payload {v}");
    }

    #[test]
    fn valid_batch_decodes() {
        let payload = bytes(&valid());
        let b = decode_row_batch(&payload).unwrap();
        assert_eq!(b.envelope.format_version, 1);
        assert_eq!(b.envelope.capture_strategy, "sqlite_row_batch_v1");
        assert_eq!(b.envelope.batch_id, BATCH_ID);
        assert_eq!(b.journal_epoch, EPOCH);
        assert_eq!(b.envelope.source_table, "device_state");
        assert_eq!(b.envelope.schema_hash, device_state_hash());
        assert_eq!(
            b.envelope.schema_columns_json.as_deref(),
            Some(crate::fingerprint::tests::DEVICE_STATE_JSON)
        );
        assert_eq!((b.first_commit_seq, b.last_commit_seq), (101, 103));
        assert_eq!(b.row_count(), 3);
        assert_eq!(b.envelope.payload_size, payload.len());
        assert_eq!(b.rows[2].op, Op::Delete);
        assert!(!b.rows[2].has_row());
        assert_eq!(
            b.rows[0].pk_hash(),
            crate::pk_hash_json(b"{\"id\":1}").unwrap()
        );
        assert_eq!(b.column_names(), ["id", "mode", "setpoint", "extra"]);
    }

    #[test]
    fn uuids_normalized_to_lowercase_and_schema_columns_optional() {
        let v = with(|m| {
            m.insert("batch_id".into(), json!(BATCH_ID.to_uppercase()));
            m.remove("schema_columns");
        });
        let b = decode(&v).unwrap();
        assert_eq!(b.envelope.batch_id, BATCH_ID);
        assert_eq!(b.envelope.schema_columns_json, None);
        let v = with(|m| {
            m.insert("schema_columns".into(), Value::Null);
        });
        assert_eq!(decode(&v).unwrap().envelope.schema_columns_json, None);
    }

    #[test]
    fn delete_row_may_be_absent() {
        let v = with(|m| {
            m["rows"][2].as_object_mut().unwrap().remove("row");
        });
        assert!(!decode(&v).unwrap().rows[2].has_row());
    }

    #[test]
    fn payload_too_large() {
        let mut p = bytes(&valid());
        p.resize(MAX_BATCH_BYTES + 1, b' ');
        assert_eq!(code_field(decode_row_batch(&p)).0, "payload_too_large");
        // Exactly at the limit is fine (trailing whitespace is valid JSON).
        p.truncate(MAX_BATCH_BYTES);
        assert!(decode_row_batch(&p).is_ok());
        // A larger limit (chunks of uploaded objects) lets a big payload through.
        p.resize(MAX_BATCH_BYTES * 2, b' ');
        assert!(crate::row_batch::decode_row_batch_within(&p, MAX_BATCH_BYTES * 2).is_ok());
    }

    #[test]
    fn lkcv_is_optional_and_checked() {
        let mut v = valid();
        v["rows"][0]["lkcv"] = json!(3);
        let batch = decode_row_batch(&bytes(&v)).unwrap();
        assert_eq!(batch.rows[0].lkcv, Some(3));
        assert_eq!(batch.rows[1].lkcv, None);
        v["rows"][0]["lkcv"] = json!(null);
        assert_eq!(decode_row_batch(&bytes(&v)).unwrap().rows[0].lkcv, None);
        for bad in [json!(-1), json!("3"), json!(1.5)] {
            v["rows"][0]["lkcv"] = bad;
            assert_eq!(
                code_field(decode_row_batch(&bytes(&v))),
                ("invalid_row", Some("rows[0].lkcv".to_owned()))
            );
        }
    }

    #[test]
    fn malformed_json() {
        for p in [
            &b""[..],
            b"\xff\xfe",
            b"{",
            b"[1,2]",
            b"\"x\"",
            b"null",
            b"{\"a\":1}{",
            b"{'a':1}",
        ] {
            assert_eq!(code_field(decode_row_batch(p)).0, "malformed_json", "{p:?}");
        }
        let deep = "[".repeat(100_000);
        assert_eq!(
            code_field(decode_row_batch(deep.as_bytes())).0,
            "malformed_json"
        );
    }

    #[test]
    fn invalid_number_encoding() {
        for p in [
            r#"{"format_version": NaN}"#,
            r#"{"x": Infinity}"#,
            r#"{"x": -Infinity}"#,
            r#"{"x": [1, nan]}"#,
            r#"{"x": 1e999}"#,
            r#"{"x": -1e999}"#,
        ] {
            assert_eq!(
                code_field(decode_row_batch(p.as_bytes())).0,
                "invalid_number_encoding",
                "{p}"
            );
        }
        // Inside strings these are just text.
        assert_eq!(
            code_field(decode_row_batch(br#"{"x": "NaN", "y": tru}"#)).0,
            "malformed_json"
        );
        assert!(!has_non_finite_token(r#"{"a":"Infinity \" NaN"}"#));
        assert!(has_non_finite_token(r#"{"a":"\\",b:NaN}"#));
    }

    #[test]
    fn tenant_fields() {
        for key in TENANT_FIELDS {
            let v = with(|m| {
                m.insert(key.into(), json!("x"));
                m.remove("format_version"); // tenant check comes first
            });
            expect(v, "envelope_unstripped_tenant_fields", Some(key));
        }
    }

    #[test]
    fn format_version() {
        let fv = Some("format_version");
        expect(
            with(|m| {
                m.remove("format_version");
            }),
            "invalid_format_version",
            fv,
        );
        for bad in [
            json!(0),
            json!(-1),
            json!("1"),
            json!(1.0),
            json!(null),
            json!(1.5),
        ] {
            expect(
                with(|m| {
                    m.insert("format_version".into(), bad.clone());
                }),
                "invalid_format_version",
                fv,
            );
        }
        for bad in [json!(2), json!(u64::MAX)] {
            expect(
                with(|m| {
                    m.insert("format_version".into(), bad.clone());
                }),
                "unsupported_format_version",
                fv,
            );
        }
    }

    #[test]
    fn capture_strategy() {
        for bad in [json!("sqlite_telemetry_batch_v1"), json!(null), json!(1)] {
            expect(
                with(|m| {
                    m.insert("capture_strategy".into(), bad.clone());
                }),
                "unsupported_capture_strategy",
                Some("capture_strategy"),
            );
        }
        expect(
            with(|m| {
                m.remove("capture_strategy");
            }),
            "unsupported_capture_strategy",
            Some("capture_strategy"),
        );
    }

    #[test]
    fn uuid_rules() {
        assert!(normalize_uuid_v7(BATCH_ID).is_some());
        assert!(normalize_uuid_v7("019693E0-7C4A-7B2E-BA1D-3F5E6D7C8B9A").is_some());
        for bad in [
            "019693e0-7c4a-4b2e-9a1d-3f5e6d7c8b9a", // v4
            "019693e0-7c4a-7b2e-ca1d-3f5e6d7c8b9a", // wrong variant
            "019693e0-7c4a-7b2e-7a1d-3f5e6d7c8b9a", // NCS variant
            "019693e07c4a7b2e9a1d3f5e6d7c8b9a",     // no hyphens
            "{019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a}",
            "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9",
            "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9g",
            "019693e0_7c4a-7b2e-9a1d-3f5e6d7c8b9a",
            "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9\u{e9}",
            "",
        ] {
            assert!(normalize_uuid_v7(bad).is_none(), "{bad}");
        }
        let v4 = json!("019693e0-7c4a-4b2e-9a1d-3f5e6d7c8b9a");
        expect(
            with(|m| {
                m.insert("batch_id".into(), v4.clone());
            }),
            "invalid_batch_id",
            Some("batch_id"),
        );
        expect(
            with(|m| {
                m.remove("batch_id");
            }),
            "invalid_batch_id",
            Some("batch_id"),
        );
        expect(
            with(|m| {
                m.insert("journal_epoch".into(), v4.clone());
            }),
            "invalid_journal_epoch",
            Some("journal_epoch"),
        );
        expect(
            with(|m| {
                m.insert("journal_epoch".into(), json!(7));
            }),
            "invalid_journal_epoch",
            Some("journal_epoch"),
        );
    }

    #[test]
    fn source_table_and_schema_hash() {
        let st = Some("source_table");
        for bad in [
            json!(""),
            json!(null),
            json!(3),
            json!("a\u{0}b"),
            json!("x".repeat(256)),
        ] {
            expect(
                with(|m| {
                    m.insert("source_table".into(), bad.clone());
                }),
                "invalid_source_table",
                st,
            );
        }
        let sh = Some("schema_hash");
        let upper = device_state_hash().to_uppercase();
        for bad in [
            json!(upper),
            json!("ab"),
            json!(null),
            json!("g".repeat(64)),
        ] {
            expect(
                with(|m| {
                    m.insert("schema_hash".into(), bad.clone());
                }),
                "invalid_schema_hash",
                sh,
            );
        }
    }

    #[test]
    fn rows_container() {
        let f = Some("rows");
        expect(
            with(|m| {
                m.remove("rows");
            }),
            "invalid_rows",
            f,
        );
        expect(
            with(|m| {
                m.insert("rows".into(), json!({}));
            }),
            "invalid_rows",
            f,
        );
        expect(
            with(|m| {
                m.insert("rows".into(), json!([]));
            }),
            "invalid_rows",
            f,
        );
        let many: Vec<Value> = (1..=4097)
            .map(|i| json!({"commit_seq": i, "op": "delete", "pk": {"id": i}}))
            .collect();
        expect(
            with(|m| {
                m.insert("rows".into(), Value::Array(many));
            }),
            "batch_too_many_rows",
            f,
        );
        let ok: Vec<Value> = (1..=4096)
            .map(|i| json!({"commit_seq": i, "op": "delete", "pk": {"id": i}}))
            .collect();
        let b = decode(&with(|m| {
            m.insert("rows".into(), Value::Array(ok));
            m.insert("first_commit_seq".into(), json!(1));
            m.insert("last_commit_seq".into(), json!(4096));
        }))
        .unwrap();
        assert_eq!(b.row_count(), 4096);
    }

    #[test]
    fn row_rules() {
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|m| m["rows"][1] = json!(5)), "rows[1]"),
            (
                Box::new(|m| m["rows"][1]["commit_seq"] = json!(0)),
                "rows[1].commit_seq",
            ),
            (
                Box::new(|m| m["rows"][1]["commit_seq"] = json!(102.0)),
                "rows[1].commit_seq",
            ),
            (
                Box::new(|m| m["rows"][1]["commit_seq"] = json!("102")),
                "rows[1].commit_seq",
            ),
            (
                Box::new(|m| {
                    m["rows"][1].as_object_mut().unwrap().remove("commit_seq");
                }),
                "rows[1].commit_seq",
            ),
            (
                Box::new(|m| m["rows"][1]["commit_seq"] = json!(101)),
                "rows[1].commit_seq",
            ),
            (
                Box::new(|m| m["rows"][2]["commit_seq"] = json!(50)),
                "rows[2].commit_seq",
            ),
            (
                Box::new(|m| m["rows"][1]["op"] = json!("upsert")),
                "rows[1].op",
            ),
            (
                Box::new(|m| m["rows"][1]["op"] = json!("UPDATE")),
                "rows[1].op",
            ),
            (
                Box::new(|m| {
                    m["rows"][1].as_object_mut().unwrap().remove("op");
                }),
                "rows[1].op",
            ),
            (Box::new(|m| m["rows"][1]["pk"] = json!({})), "rows[1].pk"),
            (Box::new(|m| m["rows"][1]["pk"] = json!([1])), "rows[1].pk"),
            (
                Box::new(|m| {
                    m["rows"][1].as_object_mut().unwrap().remove("pk");
                }),
                "rows[1].pk",
            ),
            (
                Box::new(|m| m["rows"][1]["row"] = json!(null)),
                "rows[1].row",
            ),
            (
                Box::new(|m| {
                    m["rows"][0].as_object_mut().unwrap().remove("row");
                }),
                "rows[0].row",
            ),
            (
                Box::new(|m| m["rows"][0]["row"] = json!([1])),
                "rows[0].row",
            ),
            (
                Box::new(|m| m["rows"][2]["row"] = json!({"id": 1})),
                "rows[2].row",
            ),
        ];
        for (mutate, field) in cases {
            expect(with(|m| mutate(m)), "invalid_row", Some(field));
        }
    }

    #[test]
    fn commit_seq_bounds() {
        for (key, val) in [
            ("first_commit_seq", json!(100)),
            ("first_commit_seq", json!(null)),
            ("last_commit_seq", json!(104)),
            ("last_commit_seq", json!("103")),
            ("last_commit_seq", json!(103.0)),
        ] {
            expect(
                with(|m| {
                    m.insert(key.into(), val.clone());
                }),
                "commit_seq_mismatch",
                Some(key),
            );
        }
        expect(
            with(|m| {
                m.remove("last_commit_seq");
            }),
            "commit_seq_mismatch",
            Some("last_commit_seq"),
        );
    }

    #[test]
    fn schema_columns_rules() {
        let bad_cases: Vec<(Mutation, &str)> = vec![
            (
                Box::new(|m| m["schema_columns"] = json!([])),
                "schema_columns",
            ),
            (
                Box::new(|m| m["schema_columns"]["table_name"] = json!("other")),
                "schema_columns.table_name",
            ),
            (
                Box::new(|m| m["schema_columns"]["extra"] = json!(1)),
                "schema_columns.extra",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"] = json!({})),
                "schema_columns.columns",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"] = json!([])),
                "schema_columns.columns",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][0] = json!("id")),
                "schema_columns.columns[0]",
            ),
            (
                Box::new(|m| {
                    m["schema_columns"]["columns"][0]["decl_type_affinity"] = json!("VARCHAR")
                }),
                "schema_columns.columns[0].decl_type_affinity",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][0]["pk_ordinal"] = json!(-1)),
                "schema_columns.columns[0].pk_ordinal",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][0]["not_null"] = json!(0)),
                "schema_columns.columns[0].not_null",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][0]["name"] = json!(1)),
                "schema_columns.columns[0].name",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][0]["default"] = json!(1)),
                "schema_columns.columns[0].default",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][1]["name"] = json!("mo\u{0}de")),
                "schema_columns.columns[1].name",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][1]["name"] = json!("id")),
                "schema_columns.columns",
            ),
            (
                Box::new(|m| m["schema_columns"]["columns"][1]["pk_ordinal"] = json!(3)),
                "schema_columns.columns",
            ),
        ];
        for (mutate, field) in bad_cases {
            expect(with(|m| mutate(m)), "invalid_schema_columns", Some(field));
        }
        expect(
            with(|m| m["schema_columns"]["columns"][2]["not_null"] = json!(false)),
            "schema_hash_mismatch",
            Some("schema_hash"),
        );
        // Column order inside schema_columns does not matter.
        let b = decode(&with(|m| {
            m["schema_columns"]["columns"]
                .as_array_mut()
                .unwrap()
                .reverse();
        }))
        .unwrap();
        assert_eq!(
            b.envelope.schema_columns_json.as_deref(),
            Some(crate::fingerprint::tests::DEVICE_STATE_JSON)
        );
    }

    #[test]
    fn non_ascii_names_hash_in_either_spelling() {
        // A third-party agent hashing Python's json.dumps default (ASCII-escaped)
        // and the edgesync agent (UTF-8) both validate; the canonical JSON kept is UTF-8.
        let cols = [
            ColumnSpec::new("id", "INTEGER", 1, false),
            ColumnSpec::new("temp\u{e9}rature", "REAL", 0, false),
        ];
        let fp = schema_fingerprint("m\u{e9}t\u{e9}o", &cols).unwrap();
        let ascii = sha256_hex(ascii_spelling(&fp.canonical_json).unwrap().as_bytes());
        for hash in [fp.schema_hash.clone(), ascii.clone()] {
            let b = decode(&with(|m| {
                m["source_table"] = json!("m\u{e9}t\u{e9}o");
                m["schema_hash"] = json!(hash);
                m["schema_columns"] = json!({"table_name": "m\u{e9}t\u{e9}o", "columns": [
                    {"name": "id", "decl_type_affinity": "INTEGER", "pk_ordinal": 1, "not_null": false},
                    {"name": "temp\u{e9}rature", "decl_type_affinity": "REAL", "pk_ordinal": 0, "not_null": false}
                ]});
                m["rows"] = json!([{"commit_seq": 101, "op": "insert", "pk": {"id": 1},
                                    "row": {"id": 1}}]);
                m["last_commit_seq"] = json!(101);
            }))
            .unwrap();
            assert_eq!(b.envelope.schema_hash, hash);
            assert_eq!(
                b.envelope.schema_columns_json.as_deref(),
                Some(fp.canonical_json.as_str())
            );
        }
        // A mismatch names both accepted hashes.
        let err = decode(&with(|m| {
            m["source_table"] = json!("m\u{e9}t\u{e9}o");
            m["schema_columns"]["table_name"] = json!("m\u{e9}t\u{e9}o");
        }))
        .unwrap_err();
        let CoreError::Rejected { code, detail, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(code, "schema_hash_mismatch");
        assert!(detail.contains("ASCII-escaped"), "{detail}");
    }

    #[test]
    fn check_order_first_failure_wins() {
        // Everything wrong at once: the earliest rule in the documented order reports.
        let v = json!({"format_version": 9, "capture_strategy": "x", "rows": 1});
        expect(v, "unsupported_format_version", Some("format_version"));
        let v = with(|m| {
            m.insert("schema_hash".into(), json!("zz"));
            m.insert("rows".into(), json!([]));
        });
        expect(v, "invalid_schema_hash", Some("schema_hash"));
    }

    /// Tiny deterministic PRNG (xorshift64*), no dependencies.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed | 1)
        }
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn scanner_agrees_with_serde() {
        use crate::rawjson::tests::{agree, mangled, spliced};
        let good = bytes(&valid());
        assert!(agree(&good, decode_row_batch), "valid batch left to serde");
        let text = String::from_utf8(good.clone()).unwrap();
        let mut inputs = spliced(&text, &["{", "\"rows\":[{", "\"pk\":{", "\"row\":{"]);
        inputs.extend(mangled(&good, 0x5ca1, 6000));
        let mut fast = 0;
        for p in &inputs {
            fast += usize::from(agree(p, decode_row_batch));
        }
        assert!(fast > inputs.len() / 4, "{fast} of {}", inputs.len());
    }

    #[test]
    fn never_panics_on_mangled_input() {
        let good = bytes(&valid());
        let mut rng = Rng::new(0x5eed);
        let alphabet = b"{}[]\":,0123456789.eE+-tfnulraseNIy \\\x00\xff\xc3";
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for cut in 0..good.len() {
            inputs.push(good[..cut].to_vec());
        }
        for _ in 0..3000 {
            let mut p = good.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(p.len());
                match rng.below(3) {
                    0 => p[i] = alphabet[rng.below(alphabet.len())],
                    1 => {
                        p.remove(i);
                    }
                    _ => p.insert(i, alphabet[rng.below(alphabet.len())]),
                }
            }
            inputs.push(p);
        }
        for _ in 0..2000 {
            let len = rng.below(200);
            inputs.push(
                (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect(),
            );
            inputs.push((0..len).map(|_| rng.next() as u8).collect());
        }
        inputs.push("{\"a\":".repeat(50_000).into_bytes());
        let mut accepted = 0;
        for p in &inputs {
            match std::panic::catch_unwind(|| decode_row_batch(p)) {
                Ok(Ok(b)) => {
                    accepted += 1;
                    // Whatever decodes must also encode or reject cleanly.
                    let cols: Vec<(String, crate::PgType)> = crate::PgType::ALL
                        .iter()
                        .map(|t| ("mode".to_owned(), *t))
                        .collect();
                    let _ = b.encode_state_copy(&cols, None);
                }
                Ok(Err(CoreError::Rejected { .. })) => {}
                Ok(Err(other)) => panic!("non-rejection error {other:?} for {p:?}"),
                Err(_) => panic!("panic for input {:?}", String::from_utf8_lossy(p)),
            }
        }
        assert!(accepted > 0);
    }
}
