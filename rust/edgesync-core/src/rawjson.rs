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
pub(crate) fn checked_raw<'de, A: MapAccess<'de>>(map: &mut A) -> Result<&'de RawValue, A::Error> {
    let raw: &'de RawValue = map.next_value()?;
    check_raw(raw.get()).map_err(de::Error::custom)?;
    Ok(raw)
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
    /// Forget earlier rows (a repeated `rows` key keeps the last array).
    fn reset(&mut self);
    fn read_object<A: MapAccess<'de>>(&mut self, map: A) -> Result<Self::Row, A::Error>;
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
                        value: Span::of(base, raw.get()),
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
mod tests {
    use super::*;

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
