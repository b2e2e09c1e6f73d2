//! Decoding and validation of `sync/telemetry/batch` payloads, and their COPY
//! encoding for `edge_ts_*` tables.
//!
//! Checks, in order (the first failure is the rejection code):
//! `payload_too_large`, `malformed_json`, `invalid_number_encoding`,
//! `envelope_unstripped_tenant_fields`, `invalid_format_version` /
//! `unsupported_format_version`, `unsupported_capture_strategy` (must be
//! `sqlite_telemetry_batch_v1`), `invalid_batch_id`, `invalid_batch_seq`
//! (integer >= 1), `invalid_source_table`, `invalid_schema_hash`,
//! `invalid_rows` / `batch_too_many_rows`, `row_count_mismatch`, then per row
//! `invalid_row` (`ts` not RFC 3339, `fields` not an object, row not an
//! object) / `invalid_row_id` (present, not null, and not a UUID string),
//! `cursor_timestamp_mismatch` (`cursor_start_ts` / `cursor_end_ts` are not the
//! min / max row `ts`, compared as instants), `invalid_schema_columns` /
//! `schema_hash_mismatch`.

use std::collections::HashSet;
use std::ops::Range;

use serde::de::MapAccess;
use serde_json::{Map, Value};

use crate::copy::{write_fields, PgType, SlotFinder};
use crate::envelope::{
    capture_strategy, check_tenant_fields, describe, describe_number, first_seen_at_ms,
    format_version, is_hyphenated_uuid, parse_payload, reject, rows_count, schema_columns,
    schema_hash, source_table, type_name, uuid_field, Envelope, MAX_BATCH_BYTES,
};
use crate::error::CoreError;
use crate::rawjson::{checked_raw, Elem, Entry, Key, ObjSeed, ObjShape, RowSink, Scan, Scanner};
use crate::rejection::RejectionCode;
use crate::timestamp::{parse_rfc3339, Instant};

/// The one `capture_strategy` of telemetry batches.
pub const TELEMETRY_CAPTURE_STRATEGY: &str = "sqlite_telemetry_batch_v1";

/// One validated telemetry row; its `fields` live in the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub ts: Instant,
    row_id: Option<[u8; 36]>,
    fields: Range<u32>,
}

impl Sample {
    /// The lower-cased `row_id`, when the row has one.
    pub fn row_id(&self) -> Option<&str> {
        self.row_id
            .as_ref()
            .and_then(|b| std::str::from_utf8(b).ok())
    }
}

/// A validated telemetry batch. Owns a copy of the payload text; rows refer to it.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryBatch {
    pub envelope: Envelope,
    pub batch_seq: i64,
    /// As sent.
    pub cursor_start_ts: String,
    /// As sent.
    pub cursor_end_ts: String,
    /// Earliest and latest row `ts`.
    pub first_event_ts: Instant,
    pub last_event_ts: Instant,
    pub rows: Vec<Sample>,
    text: Box<str>,
    entries: Vec<Entry>,
}

impl TelemetryBatch {
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The parsed entries of a row's `fields`.
    pub(crate) fn sample_entries(&self, s: &Sample) -> &[Entry] {
        &self.entries[s.fields.start as usize..s.fields.end as usize]
    }

    /// `(key, raw JSON value)` of a row's `fields`, in payload order.
    pub fn field_entries<'s>(&'s self, s: &'s Sample) -> impl Iterator<Item = (&'s str, &'s str)> {
        self.entries[s.fields.start as usize..s.fields.end as usize]
            .iter()
            .map(|e| (e.key.get(&self.text), e.value.get(&self.text)))
    }

    /// Union of the keys of every `fields` object, in first-seen order.
    pub fn field_names(&self) -> Vec<String> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut names = Vec::new();
        for s in &self.rows {
            for (key, _) in self.field_entries(s) {
                if seen.insert(key) {
                    names.push(key.to_owned());
                }
            }
        }
        names
    }

    /// Rows as COPY text: `[device_id,] event_ts, row_id, <one field per column>`.
    ///
    /// `event_ts` is UTC with microseconds; a missing `row_id`, an absent
    /// field and JSON null are NULL. Values follow the rules of
    /// [`crate::RowBatch::encode_state_copy`]; one that cannot be written as
    /// its type is rejected with `value_type_mismatch` (field
    /// `rows[i].fields.<column>`). `device_id`, when given, starts every line.
    pub fn encode_telemetry_copy(
        &self,
        columns: &[(String, PgType)],
        device_id: Option<&str>,
    ) -> Result<Vec<u8>, CoreError> {
        let mut out = Vec::with_capacity(self.text.len() + self.rows.len() * 96);
        let mut finder = SlotFinder::new(columns);
        for (i, s) in self.rows.iter().enumerate() {
            if let Some(d) = device_id {
                out.extend_from_slice(d.as_bytes());
                out.push(b'\t');
            }
            s.ts.write_pg(&mut out);
            out.push(b'\t');
            match &s.row_id {
                Some(id) => out.extend_from_slice(id),
                None => out.extend_from_slice(b"\\N"),
            }
            let entries = &self.entries[s.fields.start as usize..s.fields.end as usize];
            write_fields(&self.text, entries, columns, &mut finder, &mut out).map_err(
                |(slot, why)| {
                    let (name, ty) = &columns[slot];
                    CoreError::rejected(
                        RejectionCode::ValueTypeMismatch,
                        Some(format!("rows[{i}].fields.{name}")),
                        format!("row {i}: column {name:?} expects {ty}: {why}"),
                    )
                },
            )?;
            out.push(b'\n');
        }
        Ok(out)
    }
}

/// A telemetry row as parsed, validated as soon as the object ends.
struct RawSample<'a> {
    ts: Option<&'a str>,
    row_id: Option<&'a str>,
    fields: Option<ObjShape>,
}

struct SampleSink<'a> {
    text: &'a str,
    entries: Vec<Entry>,
    rows: Vec<Sample>,
    error: Option<CoreError>,
}

impl<'de> RowSink<'de> for SampleSink<'de> {
    type Row = RawSample<'de>;

    fn reset(&mut self) {
        self.entries.clear();
        self.rows.clear();
        self.error = None;
    }

    fn read_object<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<RawSample<'de>, A::Error> {
        let mut out = RawSample {
            ts: None,
            row_id: None,
            fields: None,
        };
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "ts" => out.ts = Some(checked_raw(&mut map)?),
                "row_id" => out.row_id = Some(checked_raw(&mut map)?),
                "fields" => {
                    out.fields = Some(map.next_value_seed(ObjSeed {
                        base: self.text,
                        entries: &mut self.entries,
                    })?)
                }
                _ => drop(map.next_value::<Value>()?),
            }
        }
        Ok(out)
    }

    fn scan_object(&mut self, sc: &mut Scanner<'de>) -> Scan<RawSample<'de>> {
        let mut out = RawSample {
            ts: None,
            row_id: None,
            fields: None,
        };
        let entries = &mut self.entries;
        sc.object(|sc, key| {
            match key.0.as_ref() {
                "ts" => out.ts = Some(sc.raw()?),
                "row_id" => out.row_id = Some(sc.raw()?),
                "fields" => out.fields = Some(sc.entries(entries)?),
                _ => drop(sc.value()?),
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn accept(&mut self, raw: Elem<RawSample<'de>>) {
        if self.error.is_some() {
            return;
        }
        match decode_sample(self.rows.len(), raw) {
            Ok(s) => self.rows.push(s),
            Err(e) => self.error = Some(e),
        }
    }
}

/// A raw JSON string token's text (`None` when it is not a string).
fn raw_str(t: &str) -> Option<std::borrow::Cow<'_, str>> {
    if t.len() >= 2 && t.starts_with('"') && !t.contains('\\') {
        Some(t[1..t.len() - 1].into())
    } else {
        match serde_json::from_str::<Value>(t) {
            Ok(Value::String(s)) => Some(s.into()),
            _ => None,
        }
    }
}

fn raw_describe(raw: Option<&str>) -> String {
    describe(crate::row_batch::raw_value(raw).as_ref())
}

fn decode_sample(i: usize, raw: Elem<RawSample<'_>>) -> Result<Sample, CoreError> {
    let field = |name: &str| Some(format!("rows[{i}].{name}"));
    let obj = match raw {
        Elem::Obj(o) => o,
        Elem::Other(other) => {
            return Err(reject(
                RejectionCode::InvalidRow,
                Some(format!("rows[{i}]")),
                format!("telemetry row must be an object, got {}", type_name(&other)),
            ))
        }
    };
    let ts = obj
        .ts
        .and_then(raw_str)
        .and_then(|s| parse_rfc3339(&s))
        .ok_or_else(|| {
            reject(
                RejectionCode::InvalidRow,
                field("ts"),
                format!(
                    "ts must be an RFC 3339 timestamp between years 1 and 9999, got {}",
                    raw_describe(obj.ts)
                ),
            )
        })?;
    let row_id = match obj.row_id {
        None => None,
        Some("null") => None,
        Some(r) => {
            let id = raw_str(r).filter(|s| is_hyphenated_uuid(s.as_bytes()));
            let Some(id) = id else {
                return Err(reject(
                    RejectionCode::InvalidRowId,
                    field("row_id"),
                    format!(
                        "row_id must be a hyphenated UUID string when present, got {}",
                        raw_describe(Some(r))
                    ),
                ));
            };
            let mut out = [0u8; 36];
            out.copy_from_slice(id.as_bytes());
            out.make_ascii_lowercase();
            Some(out)
        }
    };
    let fields = match obj.fields {
        Some(ObjShape::Obj(range)) => range,
        other => {
            return Err(reject(
                RejectionCode::InvalidRow,
                field("fields"),
                format!(
                    "fields must be an object, got {}",
                    match other {
                        Some(ObjShape::Other(v)) => describe(Some(&v)),
                        _ => describe(None),
                    }
                ),
            ))
        }
    };
    Ok(Sample { ts, row_id, fields })
}

fn batch_seq(top: &Map<String, Value>) -> Result<i64, CoreError> {
    match top.get("batch_seq").and_then(Value::as_i64) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(reject(
            RejectionCode::InvalidBatchSeq,
            Some("batch_seq".into()),
            format!(
                "batch_seq must be an integer >= 1, got {}",
                describe_number(top.get("batch_seq"))
            ),
        )),
    }
}

fn cursor(
    top: &Map<String, Value>,
    key: &str,
    expected: Instant,
    what: &str,
) -> Result<String, CoreError> {
    match top.get(key) {
        Some(Value::String(s)) if parse_rfc3339(s) == Some(expected) => Ok(s.clone()),
        other => Err(reject(
            RejectionCode::CursorTimestampMismatch,
            Some(key.to_owned()),
            format!(
                "{key} must be the {what} row ts ({}), got {}",
                expected.to_iso(),
                describe(other)
            ),
        )),
    }
}

/// Decodes and validates a telemetry batch payload (see the module docs for the codes).
pub fn decode_telemetry_batch(payload: &[u8]) -> Result<TelemetryBatch, CoreError> {
    let (parsed, sink) = parse_payload(payload, MAX_BATCH_BYTES, |text| SampleSink {
        text,
        entries: Vec::with_capacity(text.len() / 16),
        rows: Vec::with_capacity(text.len() / 128),
        error: None,
    })?;
    let top = &parsed.top;
    check_tenant_fields(top)?;
    let format_version = format_version(top)?;
    let capture_strategy = capture_strategy(top, TELEMETRY_CAPTURE_STRATEGY)?;
    let batch_id = uuid_field(top, "batch_id", RejectionCode::InvalidBatchId)?;
    let batch_seq = batch_seq(top)?;
    let source_table = source_table(top)?;
    let schema_hash = schema_hash(top)?;
    let n = rows_count(parsed.rows)?;
    match top.get("row_count").and_then(Value::as_u64) {
        Some(c) if c == n as u64 => {}
        _ => {
            return Err(reject(
                RejectionCode::RowCountMismatch,
                Some("row_count".into()),
                format!(
                    "row_count must equal the number of rows ({n}), got {}",
                    describe_number(top.get("row_count"))
                ),
            ))
        }
    }
    if let Some(e) = sink.error {
        return Err(e);
    }
    let rows = sink.rows;
    let first = rows.iter().map(|s| s.ts).min().unwrap_or(Instant(0));
    let last = rows.iter().map(|s| s.ts).max().unwrap_or(Instant(0));
    let cursor_start_ts = cursor(top, "cursor_start_ts", first, "earliest")?;
    let cursor_end_ts = cursor(top, "cursor_end_ts", last, "latest")?;
    let schema_columns_json = schema_columns(top, &source_table, &schema_hash)?;
    Ok(TelemetryBatch {
        envelope: Envelope {
            format_version,
            capture_strategy,
            batch_id,
            source_table,
            schema_hash,
            schema_columns_json,
            payload_size: payload.len(),
            first_seen_at_ms: first_seen_at_ms(top),
        },
        batch_seq,
        cursor_start_ts,
        cursor_end_ts,
        first_event_ts: first,
        last_event_ts: last,
        rows,
        text: parsed.text.into(),
        entries: sink.entries,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fingerprint::{schema_fingerprint, ColumnSpec};
    use serde_json::json;

    const BATCH_ID: &str = "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a";
    const ROW_ID: &str = "019693e0-0000-7000-8000-00000000000A";

    fn temps_hash() -> String {
        schema_fingerprint(
            "temps",
            &[
                ColumnSpec::new("ts", "TEXT", 0, true),
                ColumnSpec::new("value_c", "REAL", 0, false),
            ],
        )
        .unwrap()
        .schema_hash
    }

    pub(crate) fn valid() -> Value {
        json!({
            "format_version": 1,
            "capture_strategy": "sqlite_telemetry_batch_v1",
            "batch_id": BATCH_ID,
            "batch_seq": 42,
            "source_table": "temps",
            "schema_hash": temps_hash(),
            "schema_columns": {"table_name": "temps", "columns": [
                {"name": "ts", "decl_type_affinity": "TEXT", "pk_ordinal": 0, "not_null": true},
                {"name": "value_c", "decl_type_affinity": "REAL", "pk_ordinal": 0, "not_null": false}
            ]},
            "cursor_start_ts": "2026-04-28T09:00:00Z",
            "cursor_end_ts": "2026-04-28T11:00:10+02:00",
            "row_count": 3,
            "rows": [
                {"ts": "2026-04-28T09:00:01Z", "row_id": ROW_ID, "fields": {"value_c": 22.1}},
                {"ts": "2026-04-28T09:00:00Z", "fields": {"value_c": null, "note": "a\tb"}},
                {"ts": "2026-04-28T09:00:10.000Z", "row_id": null, "fields": {}}
            ]
        })
    }

    fn decode(v: &Value) -> Result<TelemetryBatch, CoreError> {
        decode_telemetry_batch(&serde_json::to_vec(v).unwrap())
    }

    fn with(f: impl FnOnce(&mut Value)) -> Value {
        let mut v = valid();
        f(&mut v);
        v
    }

    fn expect(v: Value, code: &str, field: &str) {
        match decode(&v) {
            Err(CoreError::Rejected {
                code: c, field: f, ..
            }) => {
                assert_eq!((c.as_str(), f.as_deref()), (code, Some(field)), "{v}");
            }
            other => panic!("expected {code}, got {other:?} for {v}"),
        }
    }

    #[test]
    fn valid_batch_decodes_and_encodes() {
        let b = decode(&valid()).unwrap();
        assert_eq!((b.envelope.batch_id.as_str(), b.batch_seq), (BATCH_ID, 42));
        assert_eq!(b.envelope.capture_strategy, TELEMETRY_CAPTURE_STRATEGY);
        assert_eq!(b.row_count(), 3);
        assert_eq!(b.cursor_end_ts, "2026-04-28T11:00:10+02:00");
        assert_eq!(
            b.first_event_ts.to_iso(),
            "2026-04-28T09:00:00.000000+00:00"
        );
        assert_eq!(b.last_event_ts.to_iso(), "2026-04-28T09:00:10.000000+00:00");
        assert!(b.envelope.schema_columns_json.is_some());
        assert_eq!(b.rows[0].row_id(), Some(ROW_ID.to_lowercase().as_str()));
        assert_eq!(b.rows[2].row_id(), None);
        assert_eq!(b.field_names(), ["value_c", "note"]);
        let cols = vec![
            ("value_c".to_owned(), PgType::DoublePrecision),
            ("note".to_owned(), PgType::Text),
        ];
        let out = String::from_utf8(b.encode_telemetry_copy(&cols, None).unwrap()).unwrap();
        let id = ROW_ID.to_lowercase();
        assert_eq!(
            out,
            format!(
                "2026-04-28 09:00:01.000000+00\t{id}\t22.1\t\\N\n\
                 2026-04-28 09:00:00.000000+00\t\\N\t\\N\ta\\tb\n\
                 2026-04-28 09:00:10.000000+00\t\\N\t\\N\t\\N\n"
            )
        );
        let out = b.encode_telemetry_copy(&cols, Some("dev")).unwrap();
        assert!(out.starts_with(b"dev\t2026-04-28 09:00:01"));
        let bad = vec![("note".to_owned(), PgType::Bigint)];
        let err = b.encode_telemetry_copy(&bad, None).unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::ValueTypeMismatch));
        assert_eq!(err.field(), Some("rows[1].fields.note"));
    }

    #[test]
    fn envelope_codes() {
        expect(
            with(|v| v["device_id"] = json!("x")),
            "envelope_unstripped_tenant_fields",
            "device_id",
        );
        expect(
            with(|v| v["format_version"] = json!(0)),
            "invalid_format_version",
            "format_version",
        );
        expect(
            with(|v| v["format_version"] = json!(2)),
            "unsupported_format_version",
            "format_version",
        );
        expect(
            with(|v| v["capture_strategy"] = json!("sqlite_row_batch_v1")),
            "unsupported_capture_strategy",
            "capture_strategy",
        );
        expect(
            with(|v| v["batch_id"] = json!("nope")),
            "invalid_batch_id",
            "batch_id",
        );
        for bad in [json!(0), json!(-3), json!(1.5), json!("4"), json!(null)] {
            expect(
                with(|v| v["batch_seq"] = bad.clone()),
                "invalid_batch_seq",
                "batch_seq",
            );
        }
        expect(
            with(|v| {
                v.as_object_mut().unwrap().remove("batch_seq");
            }),
            "invalid_batch_seq",
            "batch_seq",
        );
        expect(
            with(|v| v["source_table"] = json!("")),
            "invalid_source_table",
            "source_table",
        );
        expect(
            with(|v| v["schema_hash"] = json!("ab")),
            "invalid_schema_hash",
            "schema_hash",
        );
        expect(with(|v| v["rows"] = json!({})), "invalid_rows", "rows");
        expect(with(|v| v["rows"] = json!([])), "invalid_rows", "rows");
        let many: Vec<Value> = (0..4097)
            .map(|_| json!({"ts": "2026-04-28T09:00:00Z", "fields": {}}))
            .collect();
        expect(
            with(|v| v["rows"] = Value::Array(many)),
            "batch_too_many_rows",
            "rows",
        );
        expect(
            with(|v| v["schema_columns"]["columns"][1]["not_null"] = json!(true)),
            "schema_hash_mismatch",
            "schema_hash",
        );
        expect(
            with(|v| v["schema_columns"]["table_name"] = json!("other")),
            "invalid_schema_columns",
            "schema_columns.table_name",
        );
    }

    #[test]
    fn telemetry_codes() {
        for bad in [json!(2), json!(4), json!("3"), json!(null)] {
            expect(
                with(|v| v["row_count"] = bad.clone()),
                "row_count_mismatch",
                "row_count",
            );
        }
        expect(
            with(|v| {
                v.as_object_mut().unwrap().remove("row_count");
            }),
            "row_count_mismatch",
            "row_count",
        );
        for bad in [
            json!("2026-04-28T09:00:00.001Z"),
            json!("2026-04-28T08:59:59Z"),
            json!("2026-04-28 09:00:00"),
            json!(5),
        ] {
            expect(
                with(|v| v["cursor_start_ts"] = bad.clone()),
                "cursor_timestamp_mismatch",
                "cursor_start_ts",
            );
        }
        expect(
            with(|v| v["cursor_end_ts"] = json!("2026-04-28T09:00:01Z")),
            "cursor_timestamp_mismatch",
            "cursor_end_ts",
        );
        // The same instant in another zone is equal.
        assert!(decode(&with(
            |v| v["cursor_start_ts"] = json!("2026-04-28T04:00:00-05:00")
        ))
        .is_ok());
        for bad in [
            json!("x"),
            json!(7),
            json!("019693e0-0000-7000-8000-00000000000g"),
            json!({}),
        ] {
            expect(
                with(|v| v["rows"][0]["row_id"] = bad.clone()),
                "invalid_row_id",
                "rows[0].row_id",
            );
        }
        let any_uuid = json!("6ba7b810-9dad-11d1-80b4-00c04fd430c8");
        assert!(decode(&with(|v| v["rows"][0]["row_id"] = any_uuid.clone())).is_ok());
        for bad in [
            json!("2026-04-28"),
            json!(1714294800),
            json!(null),
            json!("2026-02-30T00:00:00Z"),
        ] {
            expect(
                with(|v| v["rows"][1]["ts"] = bad.clone()),
                "invalid_row",
                "rows[1].ts",
            );
        }
        expect(
            with(|v| {
                v["rows"][1].as_object_mut().unwrap().remove("ts");
            }),
            "invalid_row",
            "rows[1].ts",
        );
        for bad in [json!(null), json!([1]), json!("a")] {
            expect(
                with(|v| v["rows"][2]["fields"] = bad.clone()),
                "invalid_row",
                "rows[2].fields",
            );
        }
        expect(with(|v| v["rows"][2] = json!(3)), "invalid_row", "rows[2]");
        // The first bad row wins, and row checks come before the cursor checks.
        expect(
            with(|v| {
                v["rows"][0]["row_id"] = json!(1);
                v["rows"][1]["ts"] = json!(1);
                v["cursor_start_ts"] = json!("x");
            }),
            "invalid_row_id",
            "rows[0].row_id",
        );
    }

    #[test]
    fn number_encoding_and_json() {
        let p = serde_json::to_vec(&valid()).unwrap();
        let text = String::from_utf8(p).unwrap().replace("22.1", "1e999");
        assert_eq!(
            decode_telemetry_batch(text.as_bytes()).unwrap_err().code(),
            Some(RejectionCode::InvalidNumberEncoding)
        );
        let text = text.replace("1e999", "NaN");
        assert_eq!(
            decode_telemetry_batch(text.as_bytes()).unwrap_err().code(),
            Some(RejectionCode::InvalidNumberEncoding)
        );
        assert_eq!(
            decode_telemetry_batch(b"[]").unwrap_err().code(),
            Some(RejectionCode::MalformedJson)
        );
        let mut big = serde_json::to_vec(&valid()).unwrap();
        big.resize(crate::MAX_BATCH_BYTES + 1, b' ');
        assert_eq!(
            decode_telemetry_batch(&big).unwrap_err().code(),
            Some(RejectionCode::PayloadTooLarge)
        );
    }

    #[test]
    fn scanner_agrees_with_serde() {
        use crate::rawjson::tests::{agree, mangled, spliced};
        let good = serde_json::to_vec(&valid()).unwrap();
        assert!(
            agree(&good, decode_telemetry_batch),
            "valid batch left to serde"
        );
        let text = String::from_utf8(good.clone()).unwrap();
        let mut inputs = spliced(&text, &["{", "\"rows\":[{", "\"fields\":{"]);
        inputs.extend(mangled(&good, 0x5ca2, 6000));
        let mut fast = 0;
        for p in &inputs {
            fast += usize::from(agree(p, decode_telemetry_batch));
        }
        // Most splices are valid JSON, which the scanner must read itself.
        assert!(fast > inputs.len() / 4, "{fast} of {}", inputs.len());
    }

    #[test]
    fn never_panics_on_mangled_input() {
        let good = serde_json::to_vec(&valid()).unwrap();
        let mut rng = crate::envelope::tests::Rng::new(0x7e1e);
        let alphabet = b"{}[]\":,0123456789.eE+-TZtfnulraseNIy \\\x00\xff\xc3";
        let cols: Vec<(String, PgType)> = PgType::ALL
            .iter()
            .map(|t| ("value_c".to_owned(), *t))
            .collect();
        let mut accepted = 0;
        for cut in 0..good.len() {
            let _ = decode_telemetry_batch(&good[..cut]);
        }
        for _ in 0..4000 {
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
            match std::panic::catch_unwind(|| decode_telemetry_batch(&p)) {
                Ok(Ok(b)) => {
                    accepted += 1;
                    let _ = b.encode_telemetry_copy(&cols, Some("d"));
                }
                Ok(Err(CoreError::Rejected { .. })) => {}
                Ok(Err(other)) => panic!("non-rejection {other:?}"),
                Err(_) => panic!("panic for {:?}", String::from_utf8_lossy(&p)),
            }
        }
        assert!(accepted > 0);
    }
}
