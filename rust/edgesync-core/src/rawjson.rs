//! One-pass parsing of batch payloads that keeps row values as raw JSON text.
//!
//! The envelope's small fields become [`serde_json::Value`]s; each element of
//! `rows` is handed to a [`RowSink`] as soon as it is read, its object values
//! kept as spans of the payload's raw JSON text, so no `Value`/`Map` is built
//! per row.
//! Number tokens are range-checked during the parse (reported as serde's
//! "number out of range", which [`crate::envelope::parse_json`] classifies as
//! `invalid_number_encoding`), and escaped strings are validated, so a payload
//! is refused or accepted exactly as a full `Value` parse would.
//!
//! Two parsers do this. [`Scanner`] is a hand-written byte scanner for the
//! common case; it gives up ([`Bail`]) on anything it is not sure it handles
//! exactly as serde_json would (errors, deep nesting, a repeated `rows`), and
//! then the serde_json parser, which is the reference, reads the payload
//! again from scratch. So the scanner only has to be right on what it
//! accepts: every error, and its wording, still comes from serde_json.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::canonical::{write_canonical, write_json_str};

/// Visitor methods turning every scalar into `$wrap(Value)`.
macro_rules! scalars_as_value {
    ($wrap:path) => {
        fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::Bool(b)))
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::from(n)))
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::from(n)))
        }
        fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::from(n)))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::String(s.to_owned())))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(serde_json::Value::Null))
        }
    };
}

/// Visitor methods turning every non-object value into `$wrap(Value)`.
macro_rules! other_as_value {
    ($wrap:path) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            serde_json::Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                .map($wrap)
        }
        scalars_as_value!($wrap);
    };
}

/// An object key as written in the payload (borrowed unless it had escapes).
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Raw value text, checked like a `Value` parse would check it.
pub(crate) fn checked_raw<'de, A: MapAccess<'de>>(map: &mut A) -> Result<&'de str, A::Error> {
    let raw: &'de RawValue = map.next_value()?;
    check_raw(raw.get()).map_err(de::Error::custom)?;
    Ok(raw.get())
}

/// Range-checks number tokens and validates escaped strings of a raw value.
/// Errors carry serde_json's own wording so classification stays the same.
pub(crate) fn check_raw(raw: &str) -> Result<(), String> {
    match raw.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => {
            let suspicious = raw.len() > 300 || raw.bytes().any(|c| c == b'e' || c == b'E');
            if suspicious && !raw.parse::<f64>().is_ok_and(f64::is_finite) {
                return Err("number out of range".into());
            }
            Ok(())
        }
        Some(b'"') if raw.contains('\\') => serde_json::from_str::<String>(raw)
            .map(drop)
            .map_err(|e| e.to_string()),
        Some(b'{' | b'[') => serde_json::from_str::<Value>(raw)
            .map(drop)
            .map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// Where the rows of `rows` go while the payload is parsed: each element is
/// read (an object through [`RowSink::read_object`]) and handed over at once,
/// so no per-row tree is ever built.
pub(crate) trait RowSink<'de> {
    type Row;
    /// Forget earlier rows (a repeated `rows` key keeps the last array, and
    /// the serde path starts over after the scanner gave up).
    fn reset(&mut self);
    fn read_object<A: MapAccess<'de>>(&mut self, map: A) -> Result<Self::Row, A::Error>;
    /// As [`RowSink::read_object`], with the scanner standing at the `{`.
    fn scan_object(&mut self, sc: &mut Scanner<'de>) -> Scan<Self::Row>;
    fn accept(&mut self, row: Elem<Self::Row>);
}

/// One element of `rows`: an object read by the sink, or any other value.
pub(crate) enum Elem<T> {
    Obj(T),
    Other(Box<Value>),
}

impl<T> Elem<T> {
    fn other(v: Value) -> Self {
        Elem::Other(Box::new(v))
    }
}

impl ObjShape {
    fn other(v: Value) -> Self {
        ObjShape::Other(Box::new(v))
    }
}

/// What `rows` was: an array of this many elements, or another value.
pub(crate) enum RowsShape {
    Array(usize),
    Other(Value),
}

/// The top-level document: every key but `rows` as a `Value`.
pub(crate) struct TopDoc {
    pub fields: Map<String, Value>,
    pub rows: Option<RowsShape>,
}

/// Parses `text`, feeding `rows` to `sink`; `Ok(Err(type name))` when the
/// document is not an object.
pub(crate) fn parse_top<'de, S: RowSink<'de>>(
    text: &'de str,
    sink: &mut S,
) -> Result<Result<TopDoc, &'static str>, serde_json::Error> {
    struct V<'s, S>(&'s mut S);
    impl<'de, S: RowSink<'de>> Visitor<'de> for V<'_, S> {
        type Value = Result<TopDoc, &'static str>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut fields = Map::new();
            let mut rows = None;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if key.0 == "rows" {
                    self.0.reset();
                    rows = Some(map.next_value_seed(RowsSeed(&mut *self.0))?);
                } else {
                    let v: Value = map.next_value()?;
                    fields.insert(key.0.into_owned(), v);
                }
            }
            Ok(Ok(TopDoc { fields, rows }))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<Value>()?.is_some() {}
            Ok(Err("array"))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Err("boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Err("integer"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Err("integer"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Err("float"))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Err("string"))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Err("null"))
        }
    }
    if fast_path_enabled() {
        if let Ok(doc) = scan_top(text, sink) {
            note_fast_path(true);
            return Ok(Ok(doc));
        }
    }
    note_fast_path(false);
    sink.reset();
    let mut de = serde_json::Deserializer::from_str(text);
    let out = de.deserialize_any(V(sink))?;
    de.end()?;
    Ok(out)
}

struct RowsSeed<'s, S>(&'s mut S);

impl<'de, S: RowSink<'de>> DeserializeSeed<'de> for RowsSeed<'_, S> {
    type Value = RowsShape;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'s, S>(&'s mut S);
        impl<'de, S: RowSink<'de>> Visitor<'de> for V<'_, S> {
            type Value = RowsShape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut n = 0;
                while let Some(e) = seq.next_element_seed(ElemSeed(&mut *self.0))? {
                    self.0.accept(e);
                    n += 1;
                }
                Ok(RowsShape::Array(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(RowsShape::Other)
            }
            scalars_as_value!(RowsShape::Other);
        }
        d.deserialize_any(V(self.0))
    }
}

struct ElemSeed<'s, S>(&'s mut S);

impl<'de, S: RowSink<'de>> DeserializeSeed<'de> for ElemSeed<'_, S> {
    type Value = Elem<S::Row>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'s, S>(&'s mut S);
        impl<'de, S: RowSink<'de>> Visitor<'de> for V<'_, S> {
            type Value = Elem<S::Row>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                self.0.read_object(map).map(Elem::Obj)
            }
            other_as_value!(Elem::other);
        }
        d.deserialize_any(V(self.0))
    }
}

/// The scanner met something it leaves to serde_json (see the module docs).
#[derive(Debug)]
pub(crate) struct Bail;

pub(crate) type Scan<T> = Result<T, Bail>;

/// Nesting the scanner follows inside one value; deeper values go to serde_json,
/// so its recursion limit (128 levels) is never what decides.
const MAX_NESTING: usize = 32;

#[cfg(test)]
thread_local! {
    /// Tests set this to get the serde_json parser's verdict on a payload.
    pub(crate) static SERDE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether the last payload parsed was read by the scanner.
    pub(crate) static LAST_FAST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn fast_path_enabled() -> bool {
    #[cfg(test)]
    return !SERDE_ONLY.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
}

fn note_fast_path(_fast: bool) {
    #[cfg(test)]
    LAST_FAST.with(|c| c.set(_fast));
}

/// The scanner's reading of the whole document; `Bail` unless it is an object
/// the scanner read to the end.
fn scan_top<'de, S: RowSink<'de>>(text: &'de str, sink: &mut S) -> Scan<TopDoc> {
    let mut sc = Scanner { text, pos: 0 };
    let mut fields = Map::new();
    let mut rows = None;
    sc.ws();
    sc.object(|sc, key| {
        if key.0 == "rows" {
            if rows.is_some() {
                return Err(Bail);
            }
            rows = Some(sc.rows(sink)?);
        } else {
            let v = sc.value()?;
            fields.insert(key.0.into_owned(), v);
        }
        Ok(())
    })?;
    sc.ws();
    if sc.pos != text.len() {
        return Err(Bail);
    }
    Ok(TopDoc { fields, rows })
}

/// A cursor over the payload text for the scanner (see the module docs).
pub(crate) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// JSON whitespace, as serde_json skips it.
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Moves past a string token (the scanner stands on its `"`); true when
    /// it has escapes, which are not validated here.
    #[inline]
    fn skip_string(&mut self) -> Scan<bool> {
        let b = self.text.as_bytes();
        let end = skip_plain(b, self.pos + 1);
        if b.get(end) == Some(&b'"') {
            self.pos = end + 1;
            return Ok(false);
        }
        self.skip_escaped_string(end)
    }

    /// The rest of a string from `i`, where plain text stopped short of the
    /// closing quote.
    #[cold]
    fn skip_escaped_string(&mut self, mut i: usize) -> Scan<bool> {
        let b = self.text.as_bytes();
        loop {
            match b.get(i) {
                Some(b'\\') => i = skip_plain(b, i + 2),
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(true);
                }
                // A control character or the end of the text.
                _ => return Err(Bail),
            }
        }
    }

    /// An object key and the `:` after it; the scanner is left on the value.
    #[inline]
    fn key(&mut self) -> Scan<Key<'a>> {
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(Bail);
        }
        let key = if self.skip_string()? {
            let tok = &self.text[start..self.pos];
            Key(Cow::Owned(serde_json::from_str(tok).map_err(|_| Bail)?))
        } else {
            Key(Cow::Borrowed(&self.text[start + 1..self.pos - 1]))
        };
        self.ws();
        if self.peek() != Some(b':') {
            return Err(Bail);
        }
        self.pos += 1;
        self.ws();
        Ok(key)
    }

    /// An object, `each` reading the value of every key; the scanner must
    /// stand on the `{`.
    pub(crate) fn object(
        &mut self,
        mut each: impl FnMut(&mut Self, Key<'a>) -> Scan<()>,
    ) -> Scan<()> {
        if self.peek() != Some(b'{') {
            return Err(Bail);
        }
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.key()?;
            each(self, key)?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(Bail),
            }
        }
    }

    /// The raw text of a value, accepted only where serde_json's raw-value
    /// parse plus [`check_raw`] would accept it.
    #[inline]
    pub(crate) fn raw(&mut self) -> Scan<&'a str> {
        match self.peek() {
            Some(b'"') => {
                let start = self.pos;
                let escaped = self.skip_string()?;
                let tok = &self.text[start..self.pos];
                if escaped && serde_json::from_str::<String>(tok).is_err() {
                    return Err(Bail);
                }
                Ok(tok)
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'{' | b'[') => self.compound().map(|(tok, _)| tok),
            _ => Err(Bail),
        }
    }

    /// A value as serde_json would parse it.
    pub(crate) fn value(&mut self) -> Scan<Value> {
        match self.peek() {
            Some(b'{' | b'[') => self.compound().map(|(_, v)| v),
            _ => serde_json::from_str(self.raw()?).map_err(|_| Bail),
        }
    }

    /// Whether the next value is an object.
    pub(crate) fn at_object(&self) -> bool {
        self.peek() == Some(b'{')
    }

    /// An object's `(key, raw value)` pairs appended to `entries` (as
    /// [`ObjSeed`] does), or any other value.
    pub(crate) fn entries(&mut self, entries: &mut Vec<Entry>) -> Scan<ObjShape> {
        if !self.at_object() {
            return Ok(ObjShape::other(self.value()?));
        }
        let start = entries.len() as u32;
        let base = self.text;
        self.object(|sc, key| {
            let value = sc.raw()?;
            entries.push(Entry {
                key: KeyText::new(base, key),
                value: Span::new(sc.pos - value.len(), sc.pos),
            });
            Ok(())
        })?;
        Ok(ObjShape::Obj(start..entries.len() as u32))
    }

    #[inline]
    fn literal(&mut self, word: &'static str) -> Scan<&'a str> {
        let rest = &self.text[self.pos..];
        if !rest.starts_with(word) {
            return Err(Bail);
        }
        self.pos += word.len();
        Ok(&rest[..word.len()])
    }

    /// A number token (JSON grammar), range-checked as [`check_raw`] does.
    #[inline]
    fn number(&mut self) -> Scan<&'a str> {
        let b = self.text.as_bytes();
        let start = self.pos;
        let mut i = start;
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if b[i] == b'-' {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i + 1),
            _ => return Err(Bail),
        }
        if b.get(i) == Some(&b'.') {
            let after = digits(i + 1);
            if after == i + 1 {
                return Err(Bail);
            }
            i = after;
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = b.get(i) {
            exponent = true;
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let after = digits(i);
            if after == i {
                return Err(Bail);
            }
            i = after;
        }
        let tok = &self.text[start..i];
        if (exponent || tok.len() > 300) && !tok.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(Bail);
        }
        self.pos = i;
        Ok(tok)
    }

    /// An object or array: its text, validated and parsed by serde_json.
    fn compound(&mut self) -> Scan<(&'a str, Value)> {
        let b = self.text.as_bytes();
        let start = self.pos;
        let mut depth = 0;
        loop {
            match b.get(self.pos) {
                None => return Err(Bail),
                Some(b'"') => {
                    self.skip_string()?;
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(Bail);
                    }
                    self.pos += 1;
                }
                Some(b'}' | b']') => {
                    depth -= 1;
                    self.pos += 1;
                    if depth == 0 {
                        break;
                    }
                }
                Some(_) => self.pos += 1,
            }
        }
        // The brackets balanced; serde_json decides whether the rest is JSON.
        let tok = &self.text[start..self.pos];
        let v = serde_json::from_str(tok).map_err(|_| Bail)?;
        Ok((tok, v))
    }

    /// The value of `rows`: an array whose elements go to `sink`, or any other value.
    fn rows<'s, S: RowSink<'a>>(&mut self, sink: &'s mut S) -> Scan<RowsShape> {
        if self.peek() != Some(b'[') {
            return Ok(RowsShape::Other(self.value()?));
        }
        self.pos += 1;
        self.ws();
        let mut n = 0;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(RowsShape::Array(0));
        }
        loop {
            let elem = if self.at_object() {
                Elem::Obj(sink.scan_object(self)?)
            } else {
                Elem::other(self.value()?)
            };
            sink.accept(elem);
            n += 1;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(RowsShape::Array(n));
                }
                _ => return Err(Bail),
            }
        }
    }
}

/// The index of the first `"`, `\` or control character at or after `i`
/// (or the length of `b`), eight bytes at a time: strings are most of a payload.
#[inline]
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, the high bit is set where the byte is zero; bits above the
    // first match may be spurious (borrows), so only the lowest one counts.
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let found = zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

/// A row object's field that should be an object: the entry range it was
/// stored under, or any other value.
pub(crate) enum ObjShape {
    Obj(Range<u32>),
    Other(Box<Value>),
}

/// Reads an object's `(key, raw value)` pairs straight into `entries`.
pub(crate) struct ObjSeed<'s, 'de> {
    pub base: &'de str,
    pub entries: &'s mut Vec<Entry>,
}

impl<'de> DeserializeSeed<'de> for ObjSeed<'_, 'de> {
    type Value = ObjShape;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'s, 'de>(ObjSeed<'s, 'de>);
        impl<'de> Visitor<'de> for V<'_, 'de> {
            type Value = ObjShape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let ObjSeed { base, entries } = self.0;
                let start = entries.len() as u32;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let raw = checked_raw(&mut map)?;
                    entries.push(Entry {
                        key: KeyText::new(base, key),
                        value: Span::of(base, raw),
                    });
                }
                Ok(ObjShape::Obj(start..entries.len() as u32))
            }
            other_as_value!(ObjShape::other);
        }
        d.deserialize_any(V(self))
    }
}

/// A byte range of the payload text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The span of `part`, which must be a sub-slice of `base`.
    pub(crate) fn of(base: &str, part: &str) -> Span {
        let start = part.as_ptr() as usize - base.as_ptr() as usize;
        Span {
            start: start as u32,
            end: (start + part.len()) as u32,
        }
    }

    pub(crate) fn get(self, text: &str) -> &str {
        &text[self.start as usize..self.end as usize]
    }
}

/// A key kept as a span of the payload, or owned when it had escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyText {
    Span(Span),
    Owned(Box<str>),
}

impl KeyText {
    pub(crate) fn new(base: &str, key: Key<'_>) -> KeyText {
        match key.0 {
            Cow::Borrowed(s) => KeyText::Span(Span::of(base, s)),
            Cow::Owned(s) => KeyText::Owned(s.into_boxed_str()),
        }
    }

    pub(crate) fn get<'t>(&'t self, text: &'t str) -> &'t str {
        match self {
            KeyText::Span(s) => s.get(text),
            KeyText::Owned(s) => s,
        }
    }
}

/// One `key: value` of a row object: the key and the raw JSON text of the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub(crate) key: KeyText,
    pub(crate) value: Span,
}

/// True when `raw` is an integer token whose canonical form is itself
/// (fits i64 or u64, and is not `-0`, which serde_json reads as a float).
pub(crate) fn is_plain_integer(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return false;
    }
    if raw.starts_with('-') {
        raw != "-0" && raw.parse::<i64>().is_ok()
    } else {
        raw.parse::<u64>().is_ok()
    }
}

/// Appends the canonical JSON of a raw value (as [`write_canonical`] would
/// write its parsed form).
pub(crate) fn write_canonical_raw(raw: &str, out: &mut Vec<u8>) {
    let simple = match raw.as_bytes().first() {
        Some(b'"') => !raw.contains('\\'),
        Some(b't' | b'f' | b'n') => true,
        Some(b'-' | b'0'..=b'9') => is_plain_integer(raw),
        _ => false,
    };
    if simple {
        out.extend_from_slice(raw.as_bytes());
    } else if let Ok(v) = serde_json::from_str::<Value>(raw) {
        write_canonical(&v, out);
    } else {
        // Unreachable for validated payloads; keep the text rather than panic.
        write_json_str(raw, out);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;

    /// Decodes `p` with the scanner and with serde_json alone, asserts both
    /// give the same result, and tells whether the scanner had the last word.
    pub(crate) fn agree<T: PartialEq + fmt::Debug>(p: &[u8], decode: impl Fn(&[u8]) -> T) -> bool {
        SERDE_ONLY.with(|c| c.set(false));
        let fast = decode(p);
        let used_scanner = LAST_FAST.with(Cell::get);
        SERDE_ONLY.with(|c| c.set(true));
        let slow = decode(p);
        SERDE_ONLY.with(|c| c.set(false));
        assert_eq!(fast, slow, "payload {}", String::from_utf8_lossy(p));
        used_scanner
    }

    /// Values to splice into payloads: edge cases of every token kind.
    fn tricky_values() -> Vec<String> {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let mut out: Vec<String> = [
            "1e999",
            "-1e999",
            "-0",
            "0",
            "1E+2",
            "1.5e-400",
            "01",
            "-01",
            "1.",
            ".5",
            "-",
            "+1",
            "1e",
            "1e+",
            "2.50",
            "18446744073709551616",
            "-9223372036854775809",
            "[1,2]",
            "[1,]",
            "[ 1 , 2 ]",
            "{\"a\":{\"b\":[]}}",
            "{\"a\" :1 }",
            "{\"a\":1,}",
            "{,}",
            "[}",
            "{\"a\"}",
            "{\"k\":\"\\ud800\"}",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud83d\\ude00\"",
            "\"\\u00e9\\/\\b\"",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "\"\u{1}\"",
            "\"\u{7f}\"",
            "\"é\u{2028}\"",
            "\"\\\"\"",
            "\"\\\\\"",
            "\"\"",
            "\"abcdefghijklmnop\\n\"",
            "tru",
            "true",
            "null",
            "nul",
            "nulll",
            "false",
            "NaN",
            "Infinity",
            "-Infinity",
            "{}",
            "[]",
            "[[[[1]]]]",
            "\"2026-04-28T09:00:00Z\"",
            "\"019693e0-0000-7000-8000-00000000000A\"",
            "\"delete\"",
            "\"upd\\u0061te\"",
            "7",
            "1.0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        out.extend([
            "9".repeat(400),
            "9".repeat(301),
            "1".repeat(300),
            deep(31),
            deep(40),
            deep(126),
            deep(200),
        ]);
        out
    }

    /// Keys to splice in: plain, escaped spellings of known keys, invalid escapes.
    const TRICKY_KEYS: [&str; 16] = [
        "x",
        "\\u0074s",
        "t\\u0073",
        "row_id",
        "ts",
        "fields",
        "op",
        "pk",
        "row",
        "commit_seq",
        "lkcv",
        "\\ud800",
        "r\\u006fws",
        "rows",
        "a\tb",
        "\\q",
    ];

    /// `text` with `"key":value,` spliced in after the first `at`, for every
    /// tricky key and value (and a few spacing and framing variants).
    pub(crate) fn spliced(text: &str, at: &[&str]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for pos in at {
            assert!(text.contains(pos), "{pos}");
            for key in TRICKY_KEYS {
                for value in tricky_values() {
                    let with = format!("{pos}\"{key}\":{value},");
                    out.push(text.replacen(pos, &with, 1).into_bytes());
                }
            }
            for value in tricky_values() {
                // As the last entry, and with odd spacing around it.
                let with = format!("{pos} \"x\" \n:\t{value} \r, ");
                out.push(text.replacen(pos, &with, 1).into_bytes());
            }
        }
        let pretty = serde_json::to_vec_pretty(&serde_json::from_str::<Value>(text).unwrap());
        for framed in [
            pretty.unwrap(),
            format!(" \n{text}\t ").into_bytes(),
            format!("\u{feff}{text}").into_bytes(),
            format!("{text}x").into_bytes(),
            format!("{text}{{}}").into_bytes(),
            format!("[{text}]").into_bytes(),
            text.replace(',', " , ").into_bytes(),
            text.replace(':', ": ").into_bytes(),
            text.replacen("\"rows\":", "\"rows\":[],\"rows\":", 1)
                .into_bytes(),
            text.replacen("\"rows\":[", "\"rows\":[1,null,\"a\",[],", 1)
                .into_bytes(),
            format!("{}}}", text.replacen("\"rows\":[", "\"rows\":{\"a\":[", 1)).into_bytes(),
            text.replacen("\"rows\":", "\"r\\u006fws\":", 1)
                .into_bytes(),
        ] {
            out.push(framed);
        }
        out
    }

    /// `good` cut at every length, and mangled at random (deterministically).
    pub(crate) fn mangled(good: &[u8], seed: u64, n: usize) -> Vec<Vec<u8>> {
        let mut rng = crate::envelope::tests::Rng::new(seed);
        let alphabet = b"{}[]\":,0123456789.eE+-TZtfnulraseNIy \\\x00\x01\xff\xc3\x80\t\n";
        let mut out: Vec<Vec<u8>> = (0..good.len()).map(|cut| good[..cut].to_vec()).collect();
        for _ in 0..n {
            let mut p = good.to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(p.len());
                match rng.below(4) {
                    0 => p[i] = alphabet[rng.below(alphabet.len())],
                    1 => {
                        p.remove(i);
                    }
                    2 => {
                        // Duplicate a slice somewhere else: repeated keys, shifted framing.
                        let j = rng.below(p.len());
                        let len = rng.below(40).min(p.len() - i);
                        let part = p[i..i + len].to_vec();
                        p.splice(j..j, part);
                    }
                    _ => p.insert(i, alphabet[rng.below(alphabet.len())]),
                }
            }
            out.push(p);
        }
        out
    }

    #[test]
    fn canonical_raw_matches_value_canonical() {
        for raw in [
            "1",
            "-5",
            "-0",
            "0",
            "1.0",
            "1e2",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "\"x\"",
            "\"\\u00e9\\/\"",
            "true",
            "null",
            "{\"b\": 1, \"a\": [1, 2.50]}",
        ] {
            let mut fast = Vec::new();
            write_canonical_raw(raw, &mut fast);
            let slow = crate::canonical::to_canonical(&serde_json::from_str(raw).unwrap());
            assert_eq!(fast, slow, "{raw}");
        }
    }

    #[test]
    fn check_raw_rules() {
        assert!(check_raw("1e308").is_ok());
        assert!(check_raw("1e309")
            .unwrap_err()
            .starts_with("number out of range"));
        assert!(check_raw(&"9".repeat(400)).is_err());
        assert!(check_raw("\"\\ud800\"").is_err());
        assert!(check_raw("[1, 1e999]")
            .unwrap_err()
            .contains("number out of range"));
        assert!(check_raw("\"plain\"").is_ok());
    }
}
