//! PostgreSQL COPY text encoding of decoded row ops into a state table.
//!
//! One line per row op: `pk_hash, journal_epoch, commit_seq, deleted (t/f)`,
//! then one field per requested column. Fields are tab separated, NULL is
//! `\N`, and backslash, tab, newline and carriage return are escaped.

use std::fmt;
use std::io::Write;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::CoreError;
use crate::rawjson::{is_plain_integer, Entry};
use crate::rejection::RejectionCode;
use crate::row_batch::{Op, RowBatch};

/// Column types a mirrored source column can have in PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgType {
    Bigint,
    DoublePrecision,
    Text,
    Bytea,
    Numeric,
    Jsonb,
    Boolean,
}

impl PgType {
    pub const ALL: [PgType; 7] = [
        PgType::Bigint,
        PgType::DoublePrecision,
        PgType::Text,
        PgType::Bytea,
        PgType::Numeric,
        PgType::Jsonb,
        PgType::Boolean,
    ];

    /// The PostgreSQL type name.
    pub fn as_str(self) -> &'static str {
        match self {
            PgType::Bigint => "bigint",
            PgType::DoublePrecision => "double precision",
            PgType::Text => "text",
            PgType::Bytea => "bytea",
            PgType::Numeric => "numeric",
            PgType::Jsonb => "jsonb",
            PgType::Boolean => "boolean",
        }
    }
}

impl fmt::Display for PgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PgType {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PgType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                CoreError::Schema(format!(
                    "unknown pg_type {s:?}; expected one of bigint, double precision, text, bytea, numeric, jsonb, boolean"
                ))
            })
    }
}

/// Appends `s` escaped for a COPY text field.
pub fn escape_copy_text(s: &[u8], out: &mut Vec<u8>) {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

/// Why a value cannot be written as a type (used in the rejection detail).
pub(crate) type Mismatch = String;

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(o) if is_blob_object(o) => "blob",
        Value::Object(_) => "object",
    }
}

pub(crate) fn is_blob_object(o: &Map<String, Value>) -> bool {
    o.len() == 1 && o.contains_key("$blob")
}

/// True if a string anywhere in `v` (keys included) contains U+0000, which
/// PostgreSQL text and jsonb cannot store.
pub(crate) fn contains_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

/// Checks the plain decimal grammar `[+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)?`
/// within PostgreSQL's numeric input limits.
fn is_decimal_string(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - frac_start;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    let mut exponent: i64 = 0;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        let negative = i < b.len() && b[i] == b'-';
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            // Saturate: anything beyond the limits below is rejected anyway.
            exponent = (exponent * 10 + i64::from(b[i] - b'0')).min(1_000_000);
            i += 1;
        }
        if i == exp_start {
            return false;
        }
        if negative {
            exponent = -exponent;
        }
    }
    // PostgreSQL: |exponent| <= 1000, at most 131072 digits before the
    // decimal point and 16383 after it.
    i == b.len()
        && exponent.abs() <= 1000
        && int_digits as i64 + exponent <= 131_072
        && frac_digits as i64 - exponent <= 16_383
}

/// The bigint a JSON number stands for: an integer, or a float with no
/// fraction inside the range.
pub(crate) fn bigint_of(n: &serde_json::Number) -> Result<i64, Mismatch> {
    if let Some(i) = n.as_i64() {
        return Ok(i);
    }
    match n.as_f64().filter(|_| n.is_f64()) {
        // `i64::MAX as f64` rounds to 2^63: the range is [-2^63, 2^63).
        Some(f) if f.fract() == 0.0 && (i64::MIN as f64..i64::MAX as f64).contains(&f) => {
            Ok(f as i64)
        }
        Some(_) => Err(format!("{n} is not an integer in the bigint range")),
        None => Err(format!("{n} is outside the bigint range")),
    }
}

/// Appends the COPY text field for `v` as `ty` (NULL handled by the caller).
fn write_value(v: &Value, ty: PgType, out: &mut Vec<u8>) -> Result<(), Mismatch> {
    let mismatch = || Err(format!("cannot write a JSON {} as {ty}", json_kind(v)));
    match ty {
        PgType::Bigint => match v {
            Value::Number(n) => write!(out, "{}", bigint_of(n)?).expect("write to Vec"),
            _ => return mismatch(),
        },
        PgType::DoublePrecision => match v {
            Value::Number(n) => write!(out, "{n}").expect("write to Vec"),
            _ => return mismatch(),
        },
        PgType::Numeric => match v {
            Value::Number(n) => write!(out, "{n}").expect("write to Vec"),
            Value::String(s) if is_decimal_string(s) => out.extend_from_slice(s.as_bytes()),
            Value::String(_) => return Err("string is not a plain decimal number".into()),
            _ => return mismatch(),
        },
        PgType::Text => match v {
            Value::String(s) if s.contains('\0') => return Err("text cannot contain U+0000".into()),
            Value::String(s) => escape_copy_text(s.as_bytes(), out),
            Value::Number(n) => write!(out, "{n}").expect("write to Vec"),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            _ => return mismatch(),
        },
        PgType::Bytea => {
            let bytes: Vec<u8> = match v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Object(o) if is_blob_object(o) => match &o["$blob"] {
                    Value::String(h) => {
                        hex::decode(h).map_err(|e| format!("$blob is not valid hex: {e}"))?
                    }
                    other => {
                        return Err(format!(
                            "$blob must be a hex string, got {}",
                            json_kind(other)
                        ))
                    }
                },
                _ => return mismatch(),
            };
            write_bytea_hex(&bytes, out);
        }
        PgType::Boolean => match v {
            Value::Bool(b) => out.push(if *b { b't' } else { b'f' }),
            Value::Number(n) if n.as_i64() == Some(0) => out.push(b'f'),
            Value::Number(n) if n.as_i64() == Some(1) => out.push(b't'),
            _ => return mismatch(),
        },
        PgType::Jsonb => {
            if contains_nul(v) {
                return Err("jsonb cannot contain U+0000".into());
            }
            let text = serde_json::to_vec(v).expect("serialize JSON value");
            escape_copy_text(&text, out);
        }
    }
    Ok(())
}

/// Appends the COPY text field for the raw JSON value `raw` as `ty`, or `\N`
/// for null. Common scalars are written straight from the token; anything
/// else goes through [`write_value`], so results and errors are the same.
pub(crate) fn write_raw_value(raw: &str, ty: PgType, out: &mut Vec<u8>) -> Result<(), Mismatch> {
    let bytes = raw.as_bytes();
    match bytes.first() {
        Some(b'n') => {
            out.extend_from_slice(b"\\N");
            return Ok(());
        }
        Some(b'"') if !bytes.contains(&b'\\') => {
            // No escapes: the text between the quotes is the string, and JSON
            // forbids raw control characters, so nothing needs COPY escaping.
            let inner = &raw[1..raw.len() - 1];
            match ty {
                PgType::Text => {
                    out.extend_from_slice(inner.as_bytes());
                    return Ok(());
                }
                PgType::Bytea => {
                    write_bytea_hex(inner.as_bytes(), out);
                    return Ok(());
                }
                _ => {}
            }
        }
        Some(b'-' | b'0'..=b'9') => {
            let integer = is_plain_integer(raw);
            let fast = match ty {
                PgType::Bigint => integer && raw.parse::<i64>().is_ok(),
                PgType::Text => integer,
                // Short plain decimals only: PostgreSQL refuses float8 input
                // that underflows, which serde_json would read as 0.
                PgType::DoublePrecision => {
                    integer || (raw.len() <= 24 && !bytes.iter().any(|c| matches!(c, b'e' | b'E')))
                }
                PgType::Numeric => is_decimal_string(raw),
                PgType::Boolean => {
                    if raw == "0" || raw == "1" {
                        out.push(if raw == "1" { b't' } else { b'f' });
                        return Ok(());
                    }
                    false
                }
                _ => false,
            };
            if fast {
                out.extend_from_slice(bytes);
                return Ok(());
            }
        }
        Some(b't' | b'f') => match ty {
            PgType::Boolean => {
                out.push(bytes[0]);
                return Ok(());
            }
            PgType::Text => {
                out.extend_from_slice(bytes);
                return Ok(());
            }
            _ => {}
        },
        _ => {}
    }
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("unreadable value: {e}"))?;
    if v.is_null() {
        out.extend_from_slice(b"\\N");
        return Ok(());
    }
    write_value(&v, ty, out)
}

fn write_bytea_hex(bytes: &[u8], out: &mut Vec<u8>) {
    // bytea hex input `\x...`; the backslash itself is escaped for COPY.
    out.extend_from_slice(b"\\\\x");
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    hex::encode_to_slice(bytes, &mut out[start..]).unwrap_or_default();
}

/// Maps each key of a row object to its column slot. Rows of a batch nearly
/// always list their keys in the same order, so the slot of the key at the
/// same position in the previous row is tried first.
pub(crate) struct SlotFinder<'c> {
    columns: Vec<&'c str>,
    hints: Vec<u32>,
}

pub(crate) const NO_SLOT: u32 = u32::MAX;

impl<'c> SlotFinder<'c> {
    pub(crate) fn new(columns: &'c [(String, PgType)]) -> Self {
        SlotFinder {
            columns: columns.iter().map(|(n, _)| n.as_str()).collect(),
            hints: Vec::new(),
        }
    }

    /// Slot of the `position`-th key of a row, if it is a requested column.
    pub(crate) fn find(&mut self, position: usize, key: &str) -> Option<usize> {
        if let Some(&hint) = self.hints.get(position) {
            if hint != NO_SLOT && self.columns[hint as usize] == key {
                return Some(hint as usize);
            }
        }
        let found = self.columns.iter().position(|c| *c == key);
        if position >= self.hints.len() {
            self.hints.resize(position + 1, NO_SLOT);
        }
        self.hints[position] = found.map_or(NO_SLOT, |s| s as u32);
        found
    }
}

/// Writes `\t` + one field per column for the entries of one row object;
/// on failure, returns the column slot and why.
pub(crate) fn write_fields(
    text: &str,
    entries: &[Entry],
    columns: &[(String, PgType)],
    finder: &mut SlotFinder<'_>,
    out: &mut Vec<u8>,
) -> Result<(), (usize, Mismatch)> {
    let mut chosen: [u32; 64] = [NO_SLOT; 64];
    let mut chosen_vec: Vec<u32>;
    let chosen: &mut [u32] = if columns.len() <= 64 {
        &mut chosen[..columns.len()]
    } else {
        chosen_vec = vec![NO_SLOT; columns.len()];
        &mut chosen_vec
    };
    for (pos, e) in entries.iter().enumerate() {
        if let Some(slot) = finder.find(pos, e.key.get(text)) {
            // A repeated key keeps its last value, as in a JSON map.
            chosen[slot] = pos as u32;
        }
    }
    for (slot, (_, ty)) in columns.iter().enumerate() {
        out.push(b'\t');
        match chosen[slot] {
            NO_SLOT => out.extend_from_slice(b"\\N"),
            pos => write_raw_value(entries[pos as usize].value.get(text), *ty, out)
                .map_err(|why| (slot, why))?,
        }
    }
    Ok(())
}

/// The `value_type_mismatch` rejection of column `slot` in row op `i` (its `part`:
/// `row`, or `pk` for deletes).
pub(crate) fn row_mismatch(
    columns: &[(String, PgType)],
    slot: usize,
    i: usize,
    part: &str,
    commit_seq: i64,
    why: Mismatch,
) -> CoreError {
    let (name, ty) = &columns[slot];
    CoreError::rejected(
        RejectionCode::ValueTypeMismatch,
        Some(format!("rows[{i}].{part}.{name}")),
        format!("commit_seq {commit_seq}: column {name:?} expects {ty}: {why}"),
    )
}

impl RowBatch {
    /// Rows as COPY text for a state table with the given `(column, type)` list.
    ///
    /// Values come from `row` (from `pk` for deletes); absent keys and JSON
    /// null are NULL. A value that cannot be written as its type is rejected
    /// with `value_type_mismatch`. With `device_id` (a hyphenated UUID, checked by
    /// the caller) each line starts with it: batches of many devices then share one
    /// COPY stream.
    pub fn encode_state_copy(
        &self,
        columns: &[(String, PgType)],
        device_id: Option<&str>,
    ) -> Result<Vec<u8>, CoreError> {
        let mut out = Vec::with_capacity(self.text().len() + self.rows.len() * 150);
        let mut finder = SlotFinder::new(columns);
        let mut finder_pk = SlotFinder::new(columns);
        let mut num = itoa::Buffer::new();
        for (i, r) in self.rows.iter().enumerate() {
            let deleted = r.op == Op::Delete;
            if let Some(d) = device_id {
                out.extend_from_slice(d.as_bytes());
                out.push(b'\t');
            }
            out.extend_from_slice(r.pk_hash().as_bytes());
            out.push(b'\t');
            out.extend_from_slice(self.journal_epoch.as_bytes());
            out.push(b'\t');
            out.extend_from_slice(num.format(r.commit_seq).as_bytes());
            out.extend_from_slice(if deleted { b"\tt" } else { b"\tf" });
            let (entries, part) = self.values(r);
            let finder = if part == "row" {
                &mut finder
            } else {
                &mut finder_pk
            };
            write_fields(self.text(), entries, columns, finder, &mut out)
                .map_err(|(slot, why)| row_mismatch(columns, slot, i, part, r.commit_seq, why))?;
            out.push(b'\n');
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::envelope::tests::{valid, EPOCH};
    use crate::row_batch::decode_row_batch;
    use serde_json::json;

    fn cols(spec: &[(&str, &str)]) -> Vec<(String, PgType)> {
        spec.iter()
            .map(|(n, t)| ((*n).to_owned(), t.parse().unwrap()))
            .collect()
    }

    fn batch_with_rows(rows: Value) -> RowBatch {
        let mut v = valid();
        let n = rows.as_array().unwrap().len();
        v["rows"] = rows;
        v["first_commit_seq"] = json!(1);
        v["last_commit_seq"] = json!(n);
        v.as_object_mut().unwrap().remove("schema_columns");
        decode_row_batch(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    fn one(value: Value, ty: &str) -> Result<String, CoreError> {
        let b = batch_with_rows(json!([
            {"commit_seq": 1, "op": "insert", "pk": {"id": 1}, "row": {"id": 1, "v": value}}
        ]));
        let out = b.encode_state_copy(&cols(&[("v", ty)]), None)?;
        let line = String::from_utf8(out).unwrap();
        let field = line.trim_end_matches('\n').rsplit('\t').next().unwrap();
        Ok(field.to_owned())
    }

    #[test]
    fn pg_type_names_roundtrip() {
        for t in PgType::ALL {
            assert_eq!(t.as_str().parse::<PgType>().unwrap(), t);
            assert_eq!(t.to_string(), t.as_str());
        }
        assert!(matches!("int".parse::<PgType>(), Err(CoreError::Schema(_))));
        assert!("BIGINT".parse::<PgType>().is_err());
    }

    #[test]
    fn escape() {
        let mut out = Vec::new();
        escape_copy_text(b"a\\b\tc\nd\re", &mut out);
        assert_eq!(out, b"a\\\\b\\tc\\nd\\re");
    }

    #[test]
    fn full_batch_byte_for_byte() {
        let b = decode_row_batch(&serde_json::to_vec(&valid()).unwrap()).unwrap();
        let out = b
            .encode_state_copy(
                &cols(&[
                    ("id", "bigint"),
                    ("mode", "text"),
                    ("setpoint", "double precision"),
                    ("missing", "jsonb"),
                ]),
                None,
            )
            .unwrap();
        let h = crate::pk_hash_json(b"{\"id\":1}").unwrap();
        let expected = format!(
            "{h}\t{EPOCH}\t101\tf\t1\tcooling\t21\t\\N\n\
             {h}\t{EPOCH}\t102\tf\t1\theating\t22.5\t\\N\n\
             {h}\t{EPOCH}\t103\tt\t1\t\\N\t\\N\t\\N\n"
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn device_id_leads_each_line() {
        let b = decode_row_batch(&serde_json::to_vec(&valid()).unwrap()).unwrap();
        let dev = "0190a000-0000-7000-8000-000000000001";
        let plain = b
            .encode_state_copy(&cols(&[("id", "bigint")]), None)
            .unwrap();
        let with = b
            .encode_state_copy(&cols(&[("id", "bigint")]), Some(dev))
            .unwrap();
        let plain = String::from_utf8(plain).unwrap();
        let expected: String = plain.lines().map(|l| format!("{dev}\t{l}\n")).collect();
        assert_eq!(String::from_utf8(with).unwrap(), expected);
    }

    #[test]
    fn per_type_values() {
        let ok = [
            (json!(42), "bigint", "42"),
            (
                json!(-9_223_372_036_854_775_808i64),
                "bigint",
                "-9223372036854775808",
            ),
            (json!(3.0), "bigint", "3"),
            (json!(2.5), "double precision", "2.5"),
            (json!(7), "double precision", "7"),
            (json!(1e300), "double precision", "1e+300"),
            (json!(0.1), "numeric", "0.1"),
            (json!("-12.3400e-5"), "numeric", "-12.3400e-5"),
            (json!(".5"), "numeric", ".5"),
            (json!(12), "numeric", "12"),
            (
                json!("tab\there\\ \u{e9}\u{1F600}"),
                "text",
                "tab\\there\\\\ \u{e9}\u{1F600}",
            ),
            (json!(1.5), "text", "1.5"),
            (json!(true), "text", "true"),
            (json!({"$blob": "DEADbeef"}), "bytea", "\\\\xdeadbeef"),
            (json!({"$blob": ""}), "bytea", "\\\\x"),
            (json!("hi\n"), "bytea", "\\\\x68690a"),
            (json!(true), "boolean", "t"),
            (json!(0), "boolean", "f"),
            (json!(1), "boolean", "t"),
            (
                json!({"b": [1, "x\ny"], "a": null}),
                "jsonb",
                "{\"b\":[1,\"x\\\\ny\"],\"a\":null}",
            ),
            (json!({"$blob": "00"}), "jsonb", "{\"$blob\":\"00\"}"),
            (json!("s"), "jsonb", "\"s\""),
            (json!(null), "bigint", "\\N"),
        ];
        for (value, ty, want) in ok {
            assert_eq!(one(value.clone(), ty).unwrap(), want, "{value} as {ty}");
        }
    }

    #[test]
    fn mismatches() {
        let bad = [
            (json!("1"), "bigint"),
            (json!(1.5), "bigint"),
            (json!(1e19), "bigint"),
            (json!(u64::MAX), "bigint"),
            (json!(true), "bigint"),
            (json!("1.5"), "double precision"),
            (json!("NaN"), "numeric"),
            (json!("1e1001"), "numeric"),
            (json!(" 1"), "numeric"),
            (json!({"$blob": "00"}), "numeric"),
            (json!({"$blob": "00"}), "text"),
            (json!([1]), "text"),
            (json!("a\u{0}b"), "text"),
            (json!({"k": "a\u{0}"}), "jsonb"),
            (json!({"$blob": "abc"}), "bytea"),
            (json!({"$blob": "zz"}), "bytea"),
            (json!({"$blob": 1}), "bytea"),
            (json!({"$blob": "00", "x": 1}), "bytea"),
            (json!(5), "bytea"),
            (json!(2), "boolean"),
            (json!("t"), "boolean"),
        ];
        for (value, ty) in bad {
            match one(value.clone(), ty) {
                Err(CoreError::Rejected {
                    code: RejectionCode::ValueTypeMismatch,
                    field,
                    detail,
                }) => {
                    assert_eq!(field.as_deref(), Some("rows[0].row.v"));
                    assert!(detail.contains("commit_seq 1"), "{detail}");
                    assert!(detail.contains(ty), "{detail}");
                }
                other => panic!("{value} as {ty}: {other:?}"),
            }
        }
    }

    #[test]
    fn delete_values_come_from_pk() {
        let b = batch_with_rows(json!([
            {"commit_seq": 1, "op": "delete", "pk": {"id": 9, "site": "a"}},
            {"commit_seq": 2, "op": "delete", "pk": {"id": "x"}}
        ]));
        let out = b
            .encode_state_copy(&cols(&[("site", "text"), ("other", "text")]), None)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("\t1\tt\ta\t\\N"), "{}", lines[0]);
        let err = b
            .encode_state_copy(&cols(&[("id", "bigint")]), None)
            .unwrap_err();
        assert_eq!(err.field(), Some("rows[1].pk.id"));
    }

    /// JSON value tokens of every kind and edge, for tests of the value encoders.
    pub(crate) const VALUE_TOKENS: &[&str] = &[
        "0",
        "-0",
        "7",
        "-7",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551616",
        "1.0",
        "2.50",
        "1e3",
        "-1.5E-3",
        "0.1",
        "1e-400",
        "1e400",
        "123456789012345678901234567",
        "\"x\"",
        "\"\"",
        "\"a\\tb\"",
        "\"\\u00e9\\ud83d\\ude00\"",
        "\"a\\u0000b\"",
        "\"1.5\"",
        "true",
        "false",
        "null",
        "[1]",
        "{\"$blob\":\"0aFF\"}",
        "{\"$blob\":\"abc\"}",
        "{\"k\":[1,\"x\\ny\"],\"a\":null}",
        "{\"k\":1}",
    ];

    #[test]
    fn raw_fast_paths_match_value_path() {
        for raw in VALUE_TOKENS {
            let Ok(v) = serde_json::from_str::<Value>(raw) else {
                // Out of range for serde_json: only numeric (read as written) takes it.
                for ty in PgType::ALL.into_iter().filter(|t| *t != PgType::Numeric) {
                    assert!(
                        write_raw_value(raw, ty, &mut Vec::new()).is_err(),
                        "{raw} as {ty}"
                    );
                }
                continue;
            };
            for ty in PgType::ALL {
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                let f = write_raw_value(raw, ty, &mut fast);
                let s = if v.is_null() {
                    slow.extend_from_slice(b"\\N");
                    Ok(())
                } else {
                    write_value(&v, ty, &mut slow)
                };
                assert_eq!(f.is_ok(), s.is_ok(), "{raw} as {ty}");
                match ty {
                    // Numbers are copied as written (same value, spelling may differ).
                    PgType::DoublePrecision | PgType::Numeric if f.is_ok() && v.is_number() => {
                        let a: f64 = String::from_utf8(fast).unwrap().parse().unwrap();
                        let b: f64 = String::from_utf8(slow).unwrap().parse().unwrap();
                        assert_eq!(a, b, "{raw} as {ty}");
                    }
                    _ => assert_eq!(fast, slow, "{raw} as {ty}"),
                }
            }
        }
    }

    #[test]
    fn decimal_grammar() {
        for ok in [
            "0",
            "-1",
            "+1.5",
            "1.",
            ".5",
            "1e5",
            "1E-1000",
            "00012.3400",
        ] {
            assert!(is_decimal_string(ok), "{ok}");
        }
        for bad in [
            "", "-", ".", "e5", "1e", "1e+", "1.2.3", "0x10", "1_000", "Infinity", "nan", "1e1001",
            "1 ",
        ] {
            assert!(!is_decimal_string(bad), "{bad}");
        }
    }
}
