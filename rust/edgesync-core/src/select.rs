//! Row subsets of decoded batches, and one row's JSON: what per-row quarantine needs.
//!
//! When PostgreSQL or the COPY encoder refuses a row, the cloud writes the other rows
//! of its batch and keeps the refused one apart. [`RowBatch::select`] and
//! [`TelemetryBatch::select`] give the batch with only some of its rows (the envelope
//! unchanged; the row-derived bounds recomputed), so the same encoders write them;
//! `row_json` gives one row as JSON built from the payload's own raw value text, so
//! what is kept apart is exactly what the device sent (no number re-formatted).

use crate::canonical::write_json_str;
use crate::row_batch::{Row, RowBatch};
use crate::telemetry::{Sample, TelemetryBatch};

fn write_object<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a str, &'a str)>) {
    out.push(b'{');
    for (n, (key, raw)) in entries.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_json_str(key, out);
        out.push(b':');
        out.extend_from_slice(raw.as_bytes());
    }
    out.push(b'}');
}

fn into_string(out: Vec<u8>) -> String {
    // Keys come from &str and values are slices of the UTF-8 payload text.
    String::from_utf8(out).unwrap_or_default()
}

impl RowBatch {
    /// The batch with only the rows at `keep` (in that order), or None when an index
    /// is out of range or `keep` is empty. `first_commit_seq`/`last_commit_seq` become
    /// the bounds of the rows kept.
    pub fn select(&self, keep: &[usize]) -> Option<RowBatch> {
        if keep.is_empty() || keep.iter().any(|&i| i >= self.rows.len()) {
            return None;
        }
        let rows: Vec<Row> = keep.iter().map(|&i| self.rows[i].clone()).collect();
        let mut out = self.clone();
        out.first_commit_seq = rows.iter().map(|r| r.commit_seq).min().unwrap_or_default();
        out.last_commit_seq = rows.iter().map(|r| r.commit_seq).max().unwrap_or_default();
        out.rows = rows;
        Some(out)
    }

    /// Row `i` as a batch row object, `{"commit_seq":…,"op":…,"pk":{…},"row":{…}|null}`
    /// (with `"lkcv"` when it has one), its values as the device wrote them; None out
    /// of range.
    pub fn row_json(&self, i: usize) -> Option<String> {
        let r = self.rows.get(i)?;
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"commit_seq\":");
        out.extend_from_slice(r.commit_seq.to_string().as_bytes());
        out.extend_from_slice(b",\"op\":\"");
        out.extend_from_slice(r.op.as_str().as_bytes());
        out.extend_from_slice(b"\",\"pk\":");
        write_object(&mut out, self.pk_entries(r));
        out.extend_from_slice(b",\"row\":");
        if r.has_row() {
            write_object(&mut out, self.row_entries(r));
        } else {
            out.extend_from_slice(b"null");
        }
        if let Some(v) = r.lkcv {
            out.extend_from_slice(b",\"lkcv\":");
            out.extend_from_slice(v.to_string().as_bytes());
        }
        out.push(b'}');
        Some(into_string(out))
    }
}

impl TelemetryBatch {
    /// The batch with only the rows at `keep` (in that order), or None when an index
    /// is out of range or `keep` is empty. `first_event_ts`/`last_event_ts` become the
    /// bounds of the rows kept (the cursor fields stay as sent).
    pub fn select(&self, keep: &[usize]) -> Option<TelemetryBatch> {
        if keep.is_empty() || keep.iter().any(|&i| i >= self.rows.len()) {
            return None;
        }
        let rows: Vec<Sample> = keep.iter().map(|&i| self.rows[i].clone()).collect();
        let mut out = self.clone();
        out.first_event_ts = rows.iter().map(|s| s.ts).min()?;
        out.last_event_ts = rows.iter().map(|s| s.ts).max()?;
        out.rows = rows;
        Some(out)
    }

    /// Row `i` as a telemetry row object, `{"ts":…,"row_id":…|null,"fields":{…}}`
    /// (`ts` as ISO 8601 UTC with microseconds), its field values as the device wrote
    /// them; None out of range.
    pub fn row_json(&self, i: usize) -> Option<String> {
        let s = self.rows.get(i)?;
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"ts\":");
        write_json_str(&s.ts.to_iso(), &mut out);
        out.extend_from_slice(b",\"row_id\":");
        match s.row_id() {
            Some(id) => write_json_str(id, &mut out),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"fields\":");
        write_object(&mut out, self.field_entries(s));
        out.push(b'}');
        Some(into_string(out))
    }
}

#[cfg(test)]
mod tests {
    use crate::{decode_row_batch, decode_telemetry_batch};

    const EPOCH: &str = "0190a0a0-0000-7000-8000-000000000001";
    const BATCH: &str = "0190a0a0-0000-7000-8000-000000000002";

    fn rows_payload() -> String {
        format!(
            r#"{{"format_version":1,"capture_strategy":"sqlite_row_batch_v1","batch_id":"{BATCH}",
            "journal_epoch":"{EPOCH}","source_table":"t","schema_hash":"{h}",
            "first_commit_seq":1,"last_commit_seq":3,"row_count":3,"rows":[
            {{"commit_seq":1,"op":"insert","pk":{{"id":1}},"row":{{"id":1,"v":1.50}}}},
            {{"commit_seq":2,"op":"update","pk":{{"id":2}},"row":{{"id":2,"v":9.223372036854776e18,"s\n":"x"}}}},
            {{"commit_seq":3,"op":"delete","pk":{{"id":3}},"row":null}}]}}"#,
            h = "a".repeat(64)
        )
    }

    #[test]
    fn select_keeps_rows_and_recomputes_bounds() {
        let b = decode_row_batch(rows_payload().as_bytes()).unwrap();
        let s = b.select(&[2, 1]).unwrap();
        assert_eq!(s.row_count(), 2);
        assert_eq!((s.first_commit_seq, s.last_commit_seq), (2, 3));
        assert_eq!(s.rows[0].commit_seq, 3);
        assert_eq!(s.envelope.batch_id, b.envelope.batch_id);
        assert!(b.select(&[]).is_none());
        assert!(b.select(&[3]).is_none());
    }

    #[test]
    fn row_json_is_the_rows_raw_text() {
        let b = decode_row_batch(rows_payload().as_bytes()).unwrap();
        assert_eq!(
            b.row_json(0).unwrap(),
            r#"{"commit_seq":1,"op":"insert","pk":{"id":1},"row":{"id":1,"v":1.50}}"#
        );
        assert_eq!(
            b.row_json(1).unwrap(),
            r#"{"commit_seq":2,"op":"update","pk":{"id":2},"row":{"id":2,"v":9.223372036854776e18,"s\n":"x"}}"#
        );
        assert_eq!(
            b.row_json(2).unwrap(),
            r#"{"commit_seq":3,"op":"delete","pk":{"id":3},"row":null}"#
        );
        assert!(b.row_json(3).is_none());
    }

    #[test]
    fn telemetry_select_and_row_json() {
        let p = format!(
            r#"{{"format_version":1,"capture_strategy":"sqlite_telemetry_batch_v1","batch_id":"{BATCH}",
            "batch_seq":1,"source_table":"m","schema_hash":"{h}",
            "cursor_start_ts":"2026-04-28T09:00:00Z","cursor_end_ts":"2026-04-28T09:00:10Z",
            "row_count":2,"rows":[
            {{"ts":"2026-04-28T09:00:00Z","fields":{{"x":1}}}},
            {{"ts":"2026-04-28T09:00:10Z","row_id":"{EPOCH}","fields":{{"x":"a"}}}}]}}"#,
            h = "b".repeat(64)
        );
        let b = decode_telemetry_batch(p.as_bytes()).unwrap();
        let s = b.select(&[1]).unwrap();
        assert_eq!(s.row_count(), 1);
        assert_eq!(s.first_event_ts, s.last_event_ts);
        assert_eq!(
            s.first_event_ts.to_iso(),
            "2026-04-28T09:00:10.000000+00:00"
        );
        assert_eq!(
            b.row_json(1).unwrap(),
            format!(
                r#"{{"ts":"2026-04-28T09:00:10.000000+00:00","row_id":"{EPOCH}","fields":{{"x":"a"}}}}"#
            )
        );
        assert_eq!(
            b.row_json(0).unwrap(),
            r#"{"ts":"2026-04-28T09:00:00.000000+00:00","row_id":null,"fields":{"x":1}}"#
        );
    }
}
