//! Row JSON of `sync/rows/batch` entries, written from SQLite values.
//!
//! One entry is `{"commit_seq":N,"op":"…","pk":{…},"row":{…}|null}`, with the value
//! encoding of `docs/protocol.md` ("Values in row JSON"):
//!
//! * INTEGER, TEXT, NULL: plain JSON (strings escaped as SQLite's `json_quote` does:
//!   `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as `\u00XX`).
//! * REAL: the shortest text that reads back as the same double; ±infinity (and NaN,
//!   which SQLite never stores) as `null`, since JSON has neither.
//! * BLOB: `{"$blob":"<UPPERCASE HEX>"}`.

/// One SQLite value, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// Writes `s` as a JSON string (with its quotes).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0c => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x00..=0x1f => 0,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if short == 0 {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.push(b'\\');
            out.push(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Writes a double as the shortest JSON number that reads back exactly; non-finite
/// values as `null`. Integral values keep a `.0` (or an exponent), so they stay REAL.
pub fn write_real(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        // serde_json formats floats shortest-round-trip; writing to a Vec cannot fail.
        serde_json::to_writer(&mut *out, &v).expect("float JSON serialization");
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Writes `{"$blob":"<UPPERCASE HEX>"}`.
pub fn write_blob(out: &mut Vec<u8>, data: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(data.len() * 2 + 13);
    out.extend_from_slice(b"{\"$blob\":\"");
    for &b in data {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
    out.extend_from_slice(b"\"}");
}

/// Writes one value (see the module docs).
pub fn write_value(out: &mut Vec<u8>, v: Value<'_>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Integer(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
        Value::Real(f) => write_real(out, f),
        Value::Text(s) => write_str(out, s),
        Value::Blob(b) => write_blob(out, b),
    }
}

/// The values of one row of a table's journal query (`journal_query` in the agent's
/// `_batcher.py`): `commit_seq`, `op`, the key values, the table's columns, maybe a
/// "row exists" flag. Any source of those values (a row of a SQLite statement in
/// [`crate::journal_reader`]) is written by [`RowEncoder::encode_entry`]; the binding's
/// `RowEncoder.encode_rows` takes the same steps over tuples fetched by Python.
pub trait EntrySource {
    type Error;

    /// Column 0, the journal row's `commit_seq`.
    fn commit_seq(&self) -> Result<i64, Self::Error>;

    /// Calls `f` with column 1, the `op`.
    fn with_op<R>(&self, f: impl FnOnce(&str) -> R) -> Result<R, Self::Error>;

    /// Whether column `i` is NULL.
    fn is_null(&self, i: usize) -> Result<bool, Self::Error>;

    /// Calls `f` with column `i`'s value.
    fn with_value<R>(&self, i: usize, f: impl FnOnce(Value<'_>) -> R) -> Result<R, Self::Error>;
}

/// The object keys of one table, escaped once: writes entries of that table.
#[derive(Debug, Clone)]
pub struct RowEncoder {
    /// `{"name":` / `,"name":` of each primary-key column, in key order.
    pk_keys: Vec<Vec<u8>>,
    /// The same for every column of the row, in table order.
    row_keys: Vec<Vec<u8>>,
}

fn keys(names: &[&str]) -> Vec<Vec<u8>> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut k = vec![if i == 0 { b'{' } else { b',' }];
            write_str(&mut k, name);
            k.push(b':');
            k
        })
        .collect()
}

impl RowEncoder {
    pub fn new(pk_names: &[&str], row_names: &[&str]) -> Self {
        RowEncoder {
            pk_keys: keys(pk_names),
            row_keys: keys(row_names),
        }
    }

    pub fn pk_len(&self) -> usize {
        self.pk_keys.len()
    }

    pub fn row_len(&self) -> usize {
        self.row_keys.len()
    }

    /// Starts an entry: `{"commit_seq":N,"op":"…","pk":`; follow with
    /// [`RowEncoder::pk_value`] for each key, then [`RowEncoder::no_row`] or
    /// [`RowEncoder::row_value`] for each column and [`RowEncoder::end_row`].
    pub fn begin(&self, out: &mut Vec<u8>, commit_seq: i64, op: &str) {
        out.extend_from_slice(b"{\"commit_seq\":");
        out.extend_from_slice(itoa::Buffer::new().format(commit_seq).as_bytes());
        out.extend_from_slice(b",\"op\":");
        write_str(out, op);
        out.extend_from_slice(b",\"pk\":");
        if self.pk_keys.is_empty() {
            out.extend_from_slice(b"{}");
        }
    }

    /// The `i`-th primary-key value.
    pub fn pk_value(&self, out: &mut Vec<u8>, i: usize, v: Value<'_>) {
        out.extend_from_slice(&self.pk_keys[i]);
        write_value(out, v);
        if i + 1 == self.pk_keys.len() {
            out.push(b'}');
        }
    }

    /// Ends an entry without a row (`"row":null}`).
    pub fn no_row(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b",\"row\":null}");
    }

    /// The `i`-th column value of the row.
    pub fn row_value(&self, out: &mut Vec<u8>, i: usize, v: Value<'_>) {
        if i == 0 {
            out.extend_from_slice(b",\"row\":");
        }
        out.extend_from_slice(&self.row_keys[i]);
        write_value(out, v);
    }

    /// Ends an entry after its row values.
    pub fn end_row(&self, out: &mut Vec<u8>) {
        if self.row_keys.is_empty() {
            out.extend_from_slice(b",\"row\":{}");
        } else {
            out.push(b'}');
        }
        out.push(b'}');
    }

    /// How many columns a journal query row needs: commit_seq, op, the key, the row,
    /// and the "row exists" column at `live_index`.
    pub fn entry_width(&self, live_index: usize) -> usize {
        (2 + self.pk_len() + self.row_len()).max(live_index + 1)
    }

    /// Writes the entry of one journal query row to `out` and returns true, or writes
    /// nothing and returns false when the row of an insert or update is gone (its
    /// column `live_index`, one the live row never has NULL, is NULL).
    pub fn encode_entry<S: EntrySource>(
        &self,
        out: &mut Vec<u8>,
        live_index: usize,
        src: &S,
    ) -> Result<bool, S::Error> {
        let commit_seq = src.commit_seq()?;
        src.with_op(|op| {
            let delete = op == "delete";
            if !delete && src.is_null(live_index)? {
                return Ok(false);
            }
            let np = self.pk_len();
            self.begin(out, commit_seq, op);
            for i in 0..np {
                src.with_value(2 + i, |v| self.pk_value(out, i, v))?;
            }
            if delete {
                self.no_row(out);
            } else {
                for i in 0..self.row_len() {
                    src.with_value(2 + np + i, |v| self.row_value(out, i, v))?;
                }
                self.end_row(out);
            }
            Ok(true)
        })?
    }

    /// A whole entry; `row` None writes `"row":null`.
    pub fn encode(
        &self,
        out: &mut Vec<u8>,
        commit_seq: i64,
        op: &str,
        pk: &[Value<'_>],
        row: Option<&[Value<'_>]>,
    ) {
        assert_eq!(pk.len(), self.pk_keys.len(), "pk value count");
        self.begin(out, commit_seq, op);
        for (i, v) in pk.iter().enumerate() {
            self.pk_value(out, i, *v);
        }
        match row {
            None => self.no_row(out),
            Some(values) => {
                assert_eq!(values.len(), self.row_keys.len(), "row value count");
                for (i, v) in values.iter().enumerate() {
                    self.row_value(out, i, *v);
                }
                self.end_row(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_json(v: Value<'_>) -> String {
        let mut out = Vec::new();
        write_value(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn scalars() {
        assert_eq!(value_json(Value::Null), "null");
        assert_eq!(value_json(Value::Integer(i64::MIN)), "-9223372036854775808");
        assert_eq!(value_json(Value::Integer(42)), "42");
        assert_eq!(value_json(Value::Real(22.5)), "22.5");
        assert_eq!(value_json(Value::Real(3.0)), "3.0");
        assert_eq!(value_json(Value::Real(-0.0)), "-0.0");
        assert_eq!(value_json(Value::Real(f64::INFINITY)), "null");
        assert_eq!(value_json(Value::Real(f64::NEG_INFINITY)), "null");
        assert_eq!(value_json(Value::Real(f64::NAN)), "null");
        assert_eq!(
            value_json(Value::Blob(&[0x01, 0xab, 0xff])),
            r#"{"$blob":"01ABFF"}"#
        );
        assert_eq!(value_json(Value::Blob(&[])), r#"{"$blob":""}"#);
    }

    #[test]
    fn reals_read_back_exactly_and_stay_real() {
        for v in [
            0.1,
            1.0 / 3.0,
            0.37 * 12345.0,
            1e20,
            1e-7,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            -123456789.125,
            9007199254740993.0,
        ] {
            let text = value_json(Value::Real(v));
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(parsed.is_f64(), "{text} must stay a float");
            assert_eq!(parsed.as_f64().unwrap().to_bits(), v.to_bits(), "{text}");
        }
    }

    #[test]
    fn strings_escape_like_json_quote() {
        assert_eq!(value_json(Value::Text("")), r#""""#);
        assert_eq!(
            value_json(Value::Text("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}")),
            r#""a\"b\\c\n\r\t\b\f\u0001\u001f""#
        );
        assert_eq!(value_json(Value::Text("grüße ☃ 😀")), "\"grüße ☃ 😀\"");
        assert_eq!(value_json(Value::Text("\u{7f}/")), "\"\u{7f}/\"");
        for s in ["x\u{0}y", "\"\"", "\\u0041", "tab\there"] {
            let text = value_json(Value::Text(s));
            assert_eq!(serde_json::from_str::<String>(&text).unwrap(), s);
        }
    }

    #[test]
    fn entries() {
        let enc = RowEncoder::new(&["id", "k\"2"], &["id", "k\"2", "v"]);
        let mut out = Vec::new();
        enc.encode(
            &mut out,
            7,
            "insert",
            &[Value::Integer(1), Value::Text("a")],
            Some(&[Value::Integer(1), Value::Text("a"), Value::Blob(b"\x00")]),
        );
        out.push(b'\n');
        enc.encode(
            &mut out,
            8,
            "delete",
            &[Value::Integer(1), Value::Null],
            None,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"commit_seq\":7,\"op\":\"insert\",\"pk\":{\"id\":1,\"k\\\"2\":\"a\"},\
             \"row\":{\"id\":1,\"k\\\"2\":\"a\",\"v\":{\"$blob\":\"00\"}}}\n\
             {\"commit_seq\":8,\"op\":\"delete\",\"pk\":{\"id\":1,\"k\\\"2\":null},\"row\":null}"
        );
    }

    /// A fetched row as plain values, for `encode_entry`.
    struct Tuple<'a>(Vec<Value<'a>>);

    impl EntrySource for Tuple<'_> {
        type Error = String;

        fn commit_seq(&self) -> Result<i64, String> {
            match self.0[0] {
                Value::Integer(i) => Ok(i),
                v => Err(format!("commit_seq {v:?}")),
            }
        }

        fn with_op<R>(&self, f: impl FnOnce(&str) -> R) -> Result<R, String> {
            match self.0[1] {
                Value::Text(op) => Ok(f(op)),
                v => Err(format!("op {v:?}")),
            }
        }

        fn is_null(&self, i: usize) -> Result<bool, String> {
            Ok(self.0[i] == Value::Null)
        }

        fn with_value<R>(&self, i: usize, f: impl FnOnce(Value<'_>) -> R) -> Result<R, String> {
            Ok(f(self.0[i]))
        }
    }

    #[test]
    fn encode_entry_matches_encode() {
        use Value::*;
        let enc = RowEncoder::new(&["k"], &["k", "v"]);
        assert_eq!(enc.entry_width(2), 5);
        assert_eq!(enc.entry_width(6), 7);
        let cases: [(Vec<Value<'_>>, Option<&[Value<'_>]>); 3] = [
            (
                vec![Integer(3), Text("insert"), Text("a"), Text("a"), Real(1.5)],
                Some(&[Text("a"), Real(1.5)]),
            ),
            (
                vec![Integer(4), Text("update"), Text("a"), Null, Null],
                None,
            ),
            (
                vec![Integer(5), Text("delete"), Text("a"), Null, Null],
                None,
            ),
        ];
        for (values, row) in cases {
            let op = match values[1] {
                Text(op) => op,
                _ => unreachable!(),
            };
            let mut got = Vec::new();
            let live = enc
                .encode_entry(&mut got, 2 + 1, &Tuple(values.clone()))
                .unwrap();
            let mut want = Vec::new();
            if op == "delete" || row.is_some() {
                enc.encode(&mut want, 0, op, &[values[2]], row);
                let seq = match values[0] {
                    Integer(i) => i,
                    _ => unreachable!(),
                };
                let want_text = String::from_utf8(want).unwrap().replacen(
                    "\"commit_seq\":0",
                    &format!("\"commit_seq\":{seq}"),
                    1,
                );
                assert!(live);
                assert_eq!(String::from_utf8(got).unwrap(), want_text);
            } else {
                assert!(!live, "a gone row writes nothing");
                assert!(got.is_empty());
            }
        }
        let bad = Tuple(vec![Integer(1), Integer(2), Null, Null, Null]);
        assert!(enc.encode_entry(&mut Vec::new(), 3, &bad).is_err());
    }

    #[test]
    fn entries_parse_as_json() {
        let enc = RowEncoder::new(&["ü"], &["ü", "r"]);
        let mut out = Vec::new();
        enc.encode(
            &mut out,
            -1,
            "update",
            &[Value::Text("\u{0}")],
            Some(&[Value::Text("\u{0}"), Value::Real(f64::INFINITY)]),
        );
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(doc["pk"]["ü"], "\u{0}");
        assert!(doc["row"]["r"].is_null());
        assert_eq!(doc["commit_seq"], -1);
    }
}
