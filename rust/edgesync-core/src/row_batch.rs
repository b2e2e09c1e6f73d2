//! Decoding and validation of `sync/rows/batch` payloads.
//!
//! [`decode_row_batch`] never panics: every input either yields a [`RowBatch`]
//! or a [`CoreError::Rejected`] whose `code` is a protocol rejection code, in
//! the order of `docs/protocol.md`. Rows are kept as raw JSON slices of the
//! payload (no `serde_json::Value` per row); the COPY encoder in
//! [`crate::copy`] writes them out directly.

use std::collections::HashSet;
use std::ops::Range;

use serde::de::MapAccess;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::envelope::{
    capture_strategy, check_tenant_fields, describe, describe_number, first_seen_at_ms,
    format_version, parse_payload, reject, rows_count, schema_columns, schema_hash, source_table,
    type_name, uuid_field, Envelope, MAX_BATCH_BYTES,
};
use crate::error::CoreError;
use crate::rawjson::{
    checked_raw, write_canonical_raw, Elem, Entry, Key, ObjSeed, ObjShape, RowSink, Scan, Scanner,
};
use crate::rejection::RejectionCode;

/// The one `capture_strategy` of row batches.
pub const CAPTURE_STRATEGY: &str = "sqlite_row_batch_v1";

/// A row operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Update,
    Delete,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        match s {
            "insert" => Some(Op::Insert),
            "update" => Some(Op::Update),
            "delete" => Some(Op::Delete),
            _ => None,
        }
    }

    /// From the raw JSON token (a string, possibly with escapes).
    fn from_raw(raw: &str) -> Option<Op> {
        match raw {
            "\"insert\"" => Some(Op::Insert),
            "\"update\"" => Some(Op::Update),
            "\"delete\"" => Some(Op::Delete),
            _ => match serde_json::from_str::<Value>(raw) {
                Ok(Value::String(s)) => Op::parse(&s),
                _ => None,
            },
        }
    }
}

/// One validated row operation; its `pk` and `row` live in the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub commit_seq: i64,
    pub op: Op,
    /// `lkcv`: the last cloud version the device had applied for this key when it
    /// made the change (cloud-authoritative tables only).
    pub lkcv: Option<i64>,
    pk: Range<u32>,
    /// `None` exactly for deletes.
    row: Option<Range<u32>>,
    pk_hash: [u8; 64],
}

impl Row {
    /// `source_pk_hash` of `pk` (lowercase hex SHA-256 of its canonical JSON).
    pub fn pk_hash(&self) -> &str {
        std::str::from_utf8(&self.pk_hash).unwrap_or_default()
    }

    /// Whether the op carries a `row` object (every insert and update).
    pub fn has_row(&self) -> bool {
        self.row.is_some()
    }
}

/// A validated row batch. Owns a copy of the payload text; rows refer to it.
#[derive(Debug, Clone, PartialEq)]
pub struct RowBatch {
    pub envelope: Envelope,
    /// Lower-case UUIDv7.
    pub journal_epoch: String,
    pub first_commit_seq: i64,
    pub last_commit_seq: i64,
    pub rows: Vec<Row>,
    text: Box<str>,
    entries: Vec<Entry>,
}

impl RowBatch {
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// True when no two row ops share a primary key: then each op is its key's
    /// latest, and a writer need not pick one per key.
    pub fn keys_are_unique(&self) -> bool {
        let mut seen = std::collections::HashSet::with_capacity(self.rows.len());
        self.rows.iter().all(|r| seen.insert(&r.pk_hash))
    }

    fn entries(&self, range: &Range<u32>) -> impl Iterator<Item = (&str, &str)> {
        self.entries[range.start as usize..range.end as usize]
            .iter()
            .map(|e| (e.key.get(&self.text), e.value.get(&self.text)))
    }

    /// `(key, raw JSON value)` of a row's `pk`, in payload order.
    pub fn pk_entries<'s>(&'s self, row: &'s Row) -> impl Iterator<Item = (&'s str, &'s str)> {
        self.entries(&row.pk)
    }

    /// `(key, raw JSON value)` of a row's `row` object (empty for deletes).
    pub fn row_entries<'s>(&'s self, row: &'s Row) -> impl Iterator<Item = (&'s str, &'s str)> {
        self.entries(row.row.as_ref().unwrap_or(&(0..0)))
    }

    /// Union of the keys of every `row` and `pk` object in first-seen order
    /// (per row op: the `row` keys, then the `pk` keys).
    pub fn column_names(&self) -> Vec<String> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut names = Vec::new();
        for r in &self.rows {
            for (key, _) in self.row_entries(r).chain(self.pk_entries(r)) {
                if seen.insert(key) {
                    names.push(key.to_owned());
                }
            }
        }
        names
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The entries of the values a row op writes, and where they are: `row`, or
    /// `pk` for deletes.
    pub(crate) fn values(&self, r: &Row) -> (&[Entry], &'static str) {
        let (range, part) = match &r.row {
            Some(range) if r.op != Op::Delete => (range, "row"),
            _ => (&r.pk, "pk"),
        };
        (
            &self.entries[range.start as usize..range.end as usize],
            part,
        )
    }
}

/// A row op as parsed: raw fields, validated as soon as the object ends.
#[derive(Default)]
struct RawRowOp<'a> {
    commit_seq: Option<&'a str>,
    lkcv: Option<&'a str>,
    op: Option<&'a str>,
    pk: Option<ObjShape>,
    row: Option<ObjShape>,
}

/// Receives the row ops while the payload is parsed. The first invalid row
/// is remembered and reported after the envelope checks, in protocol order.
struct RowOpSink<'a> {
    text: &'a str,
    entries: Vec<Entry>,
    rows: Vec<Row>,
    scratch: Vec<u8>,
    error: Option<CoreError>,
}

impl<'a> RowOpSink<'a> {
    fn new(text: &'a str) -> Self {
        // Rough sizes for typical rows, to avoid regrowing large vectors.
        RowOpSink {
            text,
            entries: Vec::with_capacity(text.len() / 16),
            rows: Vec::with_capacity(text.len() / 128),
            scratch: Vec::with_capacity(256),
            error: None,
        }
    }
}

impl<'de> RowSink<'de> for RowOpSink<'de> {
    type Row = RawRowOp<'de>;

    fn reset(&mut self) {
        self.entries.clear();
        self.rows.clear();
        self.error = None;
    }

    fn read_object<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<RawRowOp<'de>, A::Error> {
        let mut out = RawRowOp::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let seed = ObjSeed {
                base: self.text,
                entries: &mut self.entries,
            };
            match key.0.as_ref() {
                "commit_seq" => out.commit_seq = Some(checked_raw(&mut map)?),
                "lkcv" => out.lkcv = Some(checked_raw(&mut map)?),
                "op" => out.op = Some(checked_raw(&mut map)?),
                "pk" => out.pk = Some(map.next_value_seed(seed)?),
                "row" => out.row = Some(map.next_value_seed(seed)?),
                _ => drop(map.next_value::<Value>()?),
            }
        }
        Ok(out)
    }

    fn scan_object(&mut self, sc: &mut Scanner<'de>) -> Scan<RawRowOp<'de>> {
        let mut out = RawRowOp::default();
        let entries = &mut self.entries;
        sc.object(|sc, key| {
            match key.0.as_ref() {
                "commit_seq" => out.commit_seq = Some(sc.raw()?),
                "lkcv" => out.lkcv = Some(sc.raw()?),
                "op" => out.op = Some(sc.raw()?),
                "pk" => out.pk = Some(sc.entries(entries)?),
                "row" => out.row = Some(sc.entries(entries)?),
                _ => drop(sc.value()?),
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn accept(&mut self, raw: Elem<RawRowOp<'de>>) {
        if self.error.is_some() {
            return;
        }
        let i = self.rows.len();
        let result = decode_row(i, raw).and_then(|(commit_seq, op, pk, row, lkcv)| {
            if let Some(prev) = self.rows.last().map(|r| r.commit_seq) {
                if commit_seq <= prev {
                    return Err(reject(
                        RejectionCode::InvalidRow,
                        Some(format!("rows[{i}].commit_seq")),
                        format!(
                            "commit_seq {commit_seq} does not increase (previous row has {prev})"
                        ),
                    ));
                }
            }
            let pk_hash = pk_hash_of(
                self.text,
                &self.entries[pk.start as usize..pk.end as usize],
                &mut self.scratch,
            );
            Ok(Row {
                commit_seq,
                op,
                lkcv,
                pk,
                row,
                pk_hash,
            })
        });
        match result {
            Ok(row) => self.rows.push(row),
            Err(e) => self.error = Some(e),
        }
    }
}

/// Decodes and validates a row batch payload (see the module docs for the codes).
pub fn decode_row_batch(payload: &[u8]) -> Result<RowBatch, CoreError> {
    decode_row_batch_within(payload, MAX_BATCH_BYTES)
}

/// As [`decode_row_batch`] with another size limit: chunks cut from an uploaded
/// object may carry one row larger than an MQTT batch allows (a spill).
pub fn decode_row_batch_within(payload: &[u8], max_bytes: usize) -> Result<RowBatch, CoreError> {
    let (parsed, sink) = parse_payload(payload, max_bytes, RowOpSink::new)?;
    let top = &parsed.top;
    check_tenant_fields(top)?;
    let format_version = format_version(top)?;
    let capture_strategy = capture_strategy(top, CAPTURE_STRATEGY)?;
    let batch_id = uuid_field(top, "batch_id", RejectionCode::InvalidBatchId)?;
    let journal_epoch = uuid_field(top, "journal_epoch", RejectionCode::InvalidJournalEpoch)?;
    let source_table = source_table(top)?;
    let schema_hash = schema_hash(top)?;
    rows_count(parsed.rows)?;
    if let Some(e) = sink.error {
        return Err(e);
    }
    let rows = sink.rows;
    // Strictly increasing, so min/max are the ends.
    let min_seq = rows[0].commit_seq;
    let max_seq = rows[rows.len() - 1].commit_seq;
    let first_commit_seq = seq_bound(top, "first_commit_seq", min_seq, "minimum")?;
    let last_commit_seq = seq_bound(top, "last_commit_seq", max_seq, "maximum")?;
    let schema_columns_json = schema_columns(top, &source_table, &schema_hash)?;

    Ok(RowBatch {
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
        journal_epoch,
        first_commit_seq,
        last_commit_seq,
        rows,
        text: parsed.text.into(),
        entries: sink.entries,
    })
}

fn seq_bound(
    top: &serde_json::Map<String, Value>,
    key: &str,
    expected: i64,
    what: &str,
) -> Result<i64, CoreError> {
    match top.get(key).and_then(Value::as_i64) {
        Some(n) if n == expected => Ok(n),
        _ => Err(reject(
            RejectionCode::CommitSeqMismatch,
            Some(key.to_owned()),
            format!(
                "{key} must equal the {what} row commit_seq {expected}, got {}",
                describe_number(top.get(key))
            ),
        )),
    }
}

pub(crate) fn raw_value(raw: Option<&str>) -> Option<Value> {
    raw.and_then(|r| serde_json::from_str(r).ok())
}

type RowParts = (i64, Op, Range<u32>, Option<Range<u32>>, Option<i64>);

fn decode_row(i: usize, raw: Elem<RawRowOp<'_>>) -> Result<RowParts, CoreError> {
    let field = |name: &str| Some(format!("rows[{i}].{name}"));
    let obj = match raw {
        Elem::Obj(o) => o,
        Elem::Other(other) => {
            return Err(reject(
                RejectionCode::InvalidRow,
                Some(format!("rows[{i}]")),
                format!("row op must be an object, got {}", type_name(&other)),
            ))
        }
    };
    let commit_seq = match obj.commit_seq.and_then(|r| r.parse::<i64>().ok()) {
        Some(n) if n >= 1 => n,
        _ => {
            return Err(reject(
                RejectionCode::InvalidRow,
                field("commit_seq"),
                format!(
                    "commit_seq must be an integer >= 1, got {}",
                    describe_number(raw_value(obj.commit_seq).as_ref())
                ),
            ))
        }
    };
    let op = obj.op.and_then(Op::from_raw).ok_or_else(|| {
        reject(
            RejectionCode::InvalidRow,
            field("op"),
            format!(
                "op must be insert, update or delete, got {}",
                describe(raw_value(obj.op).as_ref())
            ),
        )
    })?;
    let pk = match obj.pk {
        Some(ObjShape::Obj(m)) if !m.is_empty() => m,
        other => {
            return Err(reject(
                RejectionCode::InvalidRow,
                field("pk"),
                format!(
                    "pk must be a non-empty object, got {}",
                    match other {
                        Some(ObjShape::Obj(_)) => "an empty object".to_owned(),
                        Some(ObjShape::Other(v)) => describe(Some(&v)),
                        None => describe(None),
                    }
                ),
            ))
        }
    };
    let row = match (op, obj.row) {
        (Op::Delete, None) => None,
        (Op::Delete, Some(ObjShape::Other(v))) if v.is_null() => None,
        (Op::Insert | Op::Update, Some(ObjShape::Obj(m))) => Some(m),
        (Op::Delete, Some(other)) => {
            return Err(reject(
                RejectionCode::InvalidRow,
                field("row"),
                format!(
                    "row must be null for delete, got {}",
                    match other {
                        ObjShape::Obj(_) => "object",
                        ObjShape::Other(v) => type_name(&v),
                    }
                ),
            ))
        }
        (_, other) => {
            return Err(reject(
                RejectionCode::InvalidRow,
                field("row"),
                format!(
                    "row must be an object for {}, got {}",
                    op.as_str(),
                    match other {
                        Some(ObjShape::Other(v)) => describe(Some(&v)),
                        _ => describe(None),
                    }
                ),
            ))
        }
    };
    let lkcv = match obj.lkcv {
        None => None,
        Some("null") => None,
        Some(raw) => match raw.parse::<i64>() {
            Ok(n) if n >= 0 => Some(n),
            _ => {
                return Err(reject(
                    RejectionCode::InvalidRow,
                    field("lkcv"),
                    format!(
                        "lkcv must be an integer >= 0, got {}",
                        describe_number(raw_value(Some(raw)).as_ref())
                    ),
                ))
            }
        },
    };
    Ok((commit_seq, op, pk, row, lkcv))
}

/// `source_pk_hash` from raw entries: canonical JSON (keys sorted by bytes, a
/// repeated key keeps its last value) hashed with SHA-256, as lowercase hex.
fn pk_hash_of(text: &str, pk: &[Entry], scratch: &mut Vec<u8>) -> [u8; 64] {
    scratch.clear();
    scratch.push(b'{');
    if let [only] = pk {
        crate::canonical::write_json_str(only.key.get(text), scratch);
        scratch.push(b':');
        write_canonical_raw(only.value.get(text), scratch);
        scratch.push(b'}');
        return sha256_hex(scratch);
    }
    let mut sorted: Vec<(&str, &str)> = pk
        .iter()
        .map(|e| (e.key.get(text), e.value.get(text)))
        .collect();
    // Stable: equal keys keep payload order, so the last one is the value.
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut first = true;
    for (j, (key, value)) in sorted.iter().enumerate() {
        if sorted.get(j + 1).is_some_and(|next| next.0 == *key) {
            continue;
        }
        if !first {
            scratch.push(b',');
        }
        first = false;
        crate::canonical::write_json_str(key, scratch);
        scratch.push(b':');
        write_canonical_raw(value, scratch);
    }
    scratch.push(b'}');
    sha256_hex(scratch)
}

fn sha256_hex(data: &[u8]) -> [u8; 64] {
    let digest = Sha256::digest(data);
    let mut hex_out = [0u8; 64];
    hex::encode_to_slice(digest, &mut hex_out).unwrap_or_default();
    hex_out
}
