//! PostgreSQL COPY binary encoding of decoded rows.
//!
//! The same rows, values and rejections as the text encoding of [`crate::copy`],
//! but each field is sent in the type's binary wire form (`int8`, `float8`,
//! `uuid` and `timestamptz` as fixed-width big-endian values), so the server
//! copies bytes instead of parsing text — most of a COPY's server time for
//! numeric rows. `numeric` has a base-10000 wire form not written here: a
//! column list with a `numeric` column must use the text encoding
//! ([`binary_supported`] tells).

use serde_json::Value;

use crate::copy::{
    bigint_of, contains_nul, is_blob_object, json_kind, row_mismatch, Mismatch, PgType, SlotFinder,
    NO_SLOT,
};
use crate::error::CoreError;
use crate::rawjson::{is_plain_integer, Entry};
use crate::rejection::RejectionCode;
use crate::row_batch::{Op, RowBatch};
use crate::telemetry::TelemetryBatch;
use crate::timestamp::Instant;

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's timestamp epoch.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// True when every column type has a binary form written here.
pub fn binary_supported(columns: &[(String, PgType)]) -> bool {
    columns.iter().all(|(_, ty)| *ty != PgType::Numeric)
}

fn check_supported(columns: &[(String, PgType)]) -> Result<(), CoreError> {
    match columns.iter().find(|(_, ty)| *ty == PgType::Numeric) {
        Some((name, _)) => Err(CoreError::Schema(format!(
            "column {name:?} is numeric, which has no binary COPY encoding here; use the text encoding"
        ))),
        None => Ok(()),
    }
}

fn header(capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0i32.to_be_bytes()); // flags
    out.extend_from_slice(&0i32.to_be_bytes()); // header extension length
    out
}

fn field_count(n: usize, out: &mut Vec<u8>) -> Result<(), CoreError> {
    let n = i16::try_from(n)
        .map_err(|_| CoreError::Schema(format!("{n} columns exceed a COPY row's field limit")))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

fn fixed(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A variable-length field; `Err` when it is over PostgreSQL's 1 GiB value limit.
fn varlen(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), Mismatch> {
    let len = i32::try_from(bytes.len())
        .ok()
        .filter(|n| *n < (1 << 30))
        .ok_or_else(|| format!("a value of {} bytes is over the 1 GiB limit", bytes.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

fn uuid_bytes(hyphenated: &[u8]) -> Option<[u8; 16]> {
    if hyphenated.len() != 36 {
        return None;
    }
    let mut hex = [0u8; 32];
    let mut n = 0;
    for &c in hyphenated.iter().filter(|c| **c != b'-') {
        *hex.get_mut(n)? = c;
        n += 1;
    }
    let mut out = [0u8; 16];
    hex::decode_to_slice(&hex[..n], &mut out).ok()?;
    Some(out)
}

fn uuid_field(hyphenated: &str, what: &str, out: &mut Vec<u8>) -> Result<(), CoreError> {
    let bytes = uuid_bytes(hyphenated.as_bytes()).ok_or_else(|| {
        CoreError::Schema(format!("{what} is not a hyphenated UUID: {hyphenated:?}"))
    })?;
    fixed(&bytes, out);
    Ok(())
}

fn timestamptz(ts: Instant, out: &mut Vec<u8>) {
    // Truncated to microseconds, as the text form is.
    let micros = ts.0.div_euclid(1000) as i64 - PG_EPOCH_MICROS;
    fixed(&micros.to_be_bytes(), out);
}

/// Appends the binary field for `v` as `ty` (not null).
fn write_value(v: &Value, ty: PgType, out: &mut Vec<u8>) -> Result<(), Mismatch> {
    let mismatch = || Err(format!("cannot write a JSON {} as {ty}", json_kind(v)));
    match ty {
        PgType::Bigint => match v {
            Value::Number(n) => fixed(&bigint_of(n)?.to_be_bytes(), out),
            _ => return mismatch(),
        },
        PgType::DoublePrecision => match v.as_f64() {
            Some(f) => fixed(&f.to_be_bytes(), out),
            None => return mismatch(),
        },
        PgType::Numeric => return Err("numeric has no binary encoding here".into()),
        PgType::Text => match v {
            Value::String(s) if s.contains('\0') => return Err("text cannot contain U+0000".into()),
            Value::String(s) => varlen(s.as_bytes(), out)?,
            Value::Number(n) => varlen(n.to_string().as_bytes(), out)?,
            Value::Bool(b) => varlen(if *b { b"true" } else { b"false" }, out)?,
            _ => return mismatch(),
        },
        PgType::Bytea => match v {
            Value::String(s) => varlen(s.as_bytes(), out)?,
            Value::Object(o) if is_blob_object(o) => match &o["$blob"] {
                Value::String(h) => {
                    let bytes =
                        hex::decode(h).map_err(|e| format!("$blob is not valid hex: {e}"))?;
                    varlen(&bytes, out)?;
                }
                other => {
                    return Err(format!(
                        "$blob must be a hex string, got {}",
                        json_kind(other)
                    ))
                }
            },
            _ => return mismatch(),
        },
        PgType::Boolean => match v {
            Value::Bool(b) => fixed(&[u8::from(*b)], out),
            Value::Number(n) if n.as_i64() == Some(0) => fixed(&[0], out),
            Value::Number(n) if n.as_i64() == Some(1) => fixed(&[1], out),
            _ => return mismatch(),
        },
        PgType::Jsonb => {
            if contains_nul(v) {
                return Err("jsonb cannot contain U+0000".into());
            }
            // jsonb's binary input: a version byte, then the JSON text.
            let mut text = vec![1u8];
            serde_json::to_writer(&mut text, v).expect("serialize JSON value");
            varlen(&text, out)?;
        }
    }
    Ok(())
}

/// Appends the binary field for the raw JSON value `raw` as `ty` (NULL for
/// null). Common scalars are read straight from the token; anything else goes
/// through [`write_value`], so results and errors match the text encoding.
fn write_raw_value(raw: &str, ty: PgType, out: &mut Vec<u8>) -> Result<(), Mismatch> {
    let bytes = raw.as_bytes();
    match bytes.first() {
        Some(b'n') => {
            null(out);
            return Ok(());
        }
        Some(b'"') if !bytes.contains(&b'\\') && matches!(ty, PgType::Text | PgType::Bytea) => {
            // No escapes: the text between the quotes is the string (JSON forbids
            // raw control characters, so it holds no U+0000).
            return varlen(&bytes[1..bytes.len() - 1], out);
        }
        Some(b'-' | b'0'..=b'9') => match ty {
            PgType::Bigint if is_plain_integer(raw) => {
                if let Ok(i) = raw.parse::<i64>() {
                    fixed(&i.to_be_bytes(), out);
                    return Ok(());
                }
            }
            // Correctly rounded, as serde_json reads it; out of range goes the
            // slow way for serde_json's error.
            PgType::DoublePrecision => {
                if let Some(f) = raw.parse::<f64>().ok().filter(|f| f.is_finite()) {
                    fixed(&f.to_be_bytes(), out);
                    return Ok(());
                }
            }
            PgType::Text if is_plain_integer(raw) => return varlen(bytes, out),
            PgType::Boolean if raw == "0" || raw == "1" => {
                fixed(&[u8::from(raw == "1")], out);
                return Ok(());
            }
            _ => {}
        },
        Some(b't' | b'f') => match ty {
            PgType::Boolean => {
                fixed(&[u8::from(bytes[0] == b't')], out);
                return Ok(());
            }
            PgType::Text => return varlen(bytes, out),
            _ => {}
        },
        _ => {}
    }
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("unreadable value: {e}"))?;
    if v.is_null() {
        null(out);
        return Ok(());
    }
    write_value(&v, ty, out)
}

/// Appends one field per column for the entries of one row object; on
/// failure, returns the column slot and why.
fn write_fields(
    text: &str,
    entries: &[Entry],
    columns: &[(String, PgType)],
    finder: &mut SlotFinder<'_>,
    chosen: &mut Vec<u32>,
    out: &mut Vec<u8>,
) -> Result<(), (usize, Mismatch)> {
    chosen.clear();
    chosen.resize(columns.len(), NO_SLOT);
    for (pos, e) in entries.iter().enumerate() {
        if let Some(slot) = finder.find(pos, e.key.get(text)) {
            // A repeated key keeps its last value, as in a JSON map.
            chosen[slot] = pos as u32;
        }
    }
    for (slot, (_, ty)) in columns.iter().enumerate() {
        match chosen[slot] {
            NO_SLOT => null(out),
            pos => write_raw_value(entries[pos as usize].value.get(text), *ty, out)
                .map_err(|why| (slot, why))?,
        }
    }
    Ok(())
}

impl RowBatch {
    /// [`RowBatch::encode_state_copy`] in COPY binary format: `[device_id uuid,]
    /// pk_hash text, journal_epoch uuid, commit_seq bigint, deleted boolean`, then the
    /// columns.
    pub fn encode_state_binary(
        &self,
        columns: &[(String, PgType)],
        device_id: Option<&str>,
    ) -> Result<Vec<u8>, CoreError> {
        check_supported(columns)?;
        let device = match device_id {
            Some(d) => Some(uuid_bytes(d.as_bytes()).ok_or_else(|| {
                CoreError::Schema(format!("device_id is not a hyphenated UUID: {d:?}"))
            })?),
            None => None,
        };
        let platform = 4 + usize::from(device.is_some());
        let mut out = header(self.text().len() + self.rows.len() * 140);
        let epoch = uuid_bytes(self.journal_epoch.as_bytes()).ok_or_else(|| {
            CoreError::Schema(format!(
                "journal_epoch {:?} is not a UUID",
                self.journal_epoch
            ))
        })?;
        let (mut finder, mut finder_pk) = (SlotFinder::new(columns), SlotFinder::new(columns));
        let mut chosen = Vec::with_capacity(columns.len());
        for (i, r) in self.rows.iter().enumerate() {
            field_count(platform + columns.len(), &mut out)?;
            if let Some(d) = &device {
                fixed(d, &mut out);
            }
            fixed(r.pk_hash().as_bytes(), &mut out);
            fixed(&epoch, &mut out);
            fixed(&r.commit_seq.to_be_bytes(), &mut out);
            fixed(&[u8::from(r.op == Op::Delete)], &mut out);
            let (entries, part) = self.values(r);
            let finder = if part == "row" {
                &mut finder
            } else {
                &mut finder_pk
            };
            write_fields(self.text(), entries, columns, finder, &mut chosen, &mut out)
                .map_err(|(slot, why)| row_mismatch(columns, slot, i, part, r.commit_seq, why))?;
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        Ok(out)
    }
}

impl TelemetryBatch {
    /// [`TelemetryBatch::encode_telemetry_copy`] in COPY binary format:
    /// `[device_id uuid,] event_ts timestamptz, row_id uuid`, then the columns.
    pub fn encode_telemetry_binary(
        &self,
        columns: &[(String, PgType)],
        device_id: Option<&str>,
    ) -> Result<Vec<u8>, CoreError> {
        check_supported(columns)?;
        let mut out = header(self.text().len() + self.rows.len() * 120);
        let device = match device_id {
            Some(d) => Some(uuid_bytes(d.as_bytes()).ok_or_else(|| {
                CoreError::Schema(format!("device_id is not a hyphenated UUID: {d:?}"))
            })?),
            None => None,
        };
        let platform = 2 + usize::from(device.is_some());
        let mut finder = SlotFinder::new(columns);
        let mut chosen = Vec::with_capacity(columns.len());
        for (i, s) in self.rows.iter().enumerate() {
            field_count(platform + columns.len(), &mut out)?;
            if let Some(d) = &device {
                fixed(d, &mut out);
            }
            timestamptz(s.ts, &mut out);
            match s.row_id() {
                Some(id) => uuid_field(id, "row_id", &mut out)?,
                None => null(&mut out),
            }
            let entries = self.sample_entries(s);
            write_fields(
                self.text(),
                entries,
                columns,
                &mut finder,
                &mut chosen,
                &mut out,
            )
            .map_err(|(slot, why)| {
                let (name, ty) = &columns[slot];
                CoreError::rejected(
                    RejectionCode::ValueTypeMismatch,
                    Some(format!("rows[{i}].fields.{name}")),
                    format!("row {i}: column {name:?} expects {ty}: {why}"),
                )
            })?;
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::escape_copy_text;
    use crate::envelope::tests::valid;
    use crate::row_batch::decode_row_batch;
    use serde_json::json;

    /// Splits a COPY binary stream into rows of fields (None = NULL).
    fn parse(buf: &[u8]) -> Vec<Vec<Option<Vec<u8>>>> {
        assert_eq!(&buf[..11], SIGNATURE);
        let mut at = 19;
        let mut rows = Vec::new();
        loop {
            let n = i16::from_be_bytes([buf[at], buf[at + 1]]);
            at += 2;
            if n == -1 {
                assert_eq!(at, buf.len(), "trailer ends the stream");
                return rows;
            }
            let mut row = Vec::new();
            for _ in 0..n {
                let len = i32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
                at += 4;
                if len < 0 {
                    row.push(None);
                } else {
                    row.push(Some(buf[at..at + len as usize].to_vec()));
                    at += len as usize;
                }
            }
            rows.push(row);
        }
    }

    /// The COPY text a binary field stands for, for comparison with `copy`.
    fn as_text(field: &Option<Vec<u8>>, ty: PgType) -> String {
        let Some(b) = field else {
            return "\\N".into();
        };
        match ty {
            PgType::Bigint => i64::from_be_bytes(b[..].try_into().unwrap()).to_string(),
            PgType::DoublePrecision => {
                format!("{:?}", f64::from_be_bytes(b[..].try_into().unwrap()))
            }
            PgType::Boolean => (if b[0] == 1 { "t" } else { "f" }).into(),
            PgType::Bytea => format!("\\\\x{}", hex::encode(b)),
            PgType::Text | PgType::Jsonb => {
                let body = if ty == PgType::Jsonb {
                    assert_eq!(b[0], 1);
                    &b[1..]
                } else {
                    &b[..]
                };
                let mut out = Vec::new();
                escape_copy_text(body, &mut out);
                String::from_utf8(out).unwrap()
            }
            PgType::Numeric => unreachable!(),
        }
    }

    fn text_field(raw: &str, ty: PgType) -> Result<String, Mismatch> {
        let mut out = Vec::new();
        crate::copy::write_raw_value(raw, ty, &mut out)?;
        let s = String::from_utf8(out).unwrap();
        Ok(match ty {
            // Compare numbers by value: the text form keeps the token's spelling.
            PgType::DoublePrecision if s != "\\N" => format!("{:?}", s.parse::<f64>().unwrap()),
            _ => s,
        })
    }

    #[test]
    fn every_value_matches_the_text_encoding() {
        for raw in crate::copy::tests::VALUE_TOKENS {
            for ty in PgType::ALL.into_iter().filter(|t| *t != PgType::Numeric) {
                let mut bin = Vec::new();
                let b = write_raw_value(raw, ty, &mut bin);
                let t = text_field(raw, ty);
                match (b, t) {
                    (Ok(()), Ok(text)) => {
                        let mut framed = header(0);
                        field_count(1, &mut framed).unwrap();
                        framed.extend_from_slice(&bin);
                        framed.extend_from_slice(&(-1i16).to_be_bytes());
                        let rows = parse(&framed);
                        assert_eq!(as_text(&rows[0][0], ty), text, "{raw} as {ty}");
                    }
                    (Err(_), Err(_)) => {}
                    (b, t) => panic!("{raw} as {ty}: binary {b:?}, text {t:?}"),
                }
            }
        }
    }

    #[test]
    fn state_rows_frame_like_the_text_encoding() {
        let b = decode_row_batch(&serde_json::to_vec(&valid()).unwrap()).unwrap();
        let cols: Vec<(String, PgType)> = [
            ("id", PgType::Bigint),
            ("mode", PgType::Text),
            ("setpoint", PgType::DoublePrecision),
            ("missing", PgType::Jsonb),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t))
        .collect();
        let text = String::from_utf8(b.encode_state_copy(&cols, None).unwrap()).unwrap();
        let rows = parse(&b.encode_state_binary(&cols, None).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), lines.len());
        for (row, line) in rows.iter().zip(lines) {
            let want: Vec<&str> = line.split('\t').collect();
            assert_eq!(row.len(), want.len());
            assert_eq!(row[0].as_deref(), Some(want[0].as_bytes()));
            assert_eq!(
                uuid_bytes(want[1].as_bytes()).unwrap().to_vec(),
                row[1].clone().unwrap()
            );
            assert_eq!(as_text(&row[2], PgType::Bigint), want[2]);
            assert_eq!(as_text(&row[3], PgType::Boolean), want[3]);
            for (k, (_, ty)) in cols.iter().enumerate() {
                let got = as_text(&row[4 + k], *ty);
                let exp = want[4 + k];
                if *ty == PgType::DoublePrecision && exp != "\\N" {
                    assert_eq!(got, format!("{:?}", exp.parse::<f64>().unwrap()));
                } else {
                    assert_eq!(got, exp);
                }
            }
        }
    }

    #[test]
    fn mismatch_names_the_field_and_numeric_is_refused() {
        let mut v = valid();
        v["rows"] = json!([{"commit_seq": 1, "op": "insert", "pk": {"id": 1},
                            "row": {"id": 1, "v": "x"}}]);
        v["first_commit_seq"] = json!(1);
        v["last_commit_seq"] = json!(1);
        v.as_object_mut().unwrap().remove("schema_columns");
        let b = decode_row_batch(&serde_json::to_vec(&v).unwrap()).unwrap();
        let err = b
            .encode_state_binary(&[("v".to_owned(), PgType::Bigint)], None)
            .unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::ValueTypeMismatch));
        assert_eq!(err.field(), Some("rows[0].row.v"));
        let cols = [("v".to_owned(), PgType::Numeric)];
        assert!(!binary_supported(&cols));
        assert!(matches!(
            b.encode_state_binary(&cols, None),
            Err(CoreError::Schema(_))
        ));
    }

    #[test]
    fn timestamps_count_from_2000() {
        let mut out = Vec::new();
        timestamptz(Instant(946_684_800_000_000_000 + 1_999), &mut out);
        assert_eq!(out[4..], 1i64.to_be_bytes());
        out.clear();
        timestamptz(Instant(-1), &mut out);
        assert_eq!(out[4..], (-PG_EPOCH_MICROS - 1).to_be_bytes());
    }
    #[test]
    fn telemetry_rows_frame_like_the_text_encoding() {
        let v = crate::telemetry::tests::valid();
        let b = crate::telemetry::decode_telemetry_batch(&serde_json::to_vec(&v).unwrap()).unwrap();
        let cols: Vec<(String, PgType)> = b
            .field_names()
            .into_iter()
            .map(|n| (n, PgType::Text))
            .collect();
        let dev = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        let text = String::from_utf8(b.encode_telemetry_copy(&cols, Some(dev)).unwrap()).unwrap();
        let rows = parse(&b.encode_telemetry_binary(&cols, Some(dev)).unwrap());
        assert_eq!(rows.len(), b.row_count());
        for ((row, line), s) in rows.iter().zip(text.lines()).zip(&b.rows) {
            let want: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                row[0].clone().unwrap(),
                uuid_bytes(dev.as_bytes()).unwrap().to_vec()
            );
            let micros = i64::from_be_bytes(row[1].clone().unwrap()[..].try_into().unwrap());
            assert_eq!(micros, s.ts.0.div_euclid(1000) as i64 - PG_EPOCH_MICROS);
            match s.row_id() {
                Some(id) => assert_eq!(row[2].clone().unwrap(), uuid_bytes(id.as_bytes()).unwrap()),
                None => assert_eq!(row[2], None),
            }
            for k in 0..cols.len() {
                assert_eq!(as_text(&row[3 + k], PgType::Text), want[3 + k]);
            }
        }
        assert!(b.encode_telemetry_binary(&cols, Some("nope")).is_err());
    }
}
