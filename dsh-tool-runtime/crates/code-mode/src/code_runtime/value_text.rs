//! A run's completion value as compact JSON text ([`JsonText`]), and the one pass that turns the
//! text a program's side sent into it ([`canonical`]).
//!
//! A completion may be as large as the output budget (`max_output_bytes`, 64 MiB by default).
//! Decoded into a [`Value`] tree, dense JSON takes tens of times its text (`[0,0,…]` costs two
//! enum slots per two bytes), so the host keeps a completion as text: checking it (lossless, at
//! most [`MAX_DEPTH`](super::frame::MAX_DEPTH) deep) and rewriting it compactly streams over it
//! without building a tree, and the result takes exactly its bytes.

use std::fmt;
use std::io::Write as _;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::json::compact;

/// Deepest JSON value that crosses the code-runtime protocol, either way (public as
/// `code_runtime::frame::MAX_DEPTH`): programs build deep values. Deeper values are rejected
/// where they are made: in the child before sending, in the host before replying, and dropped
/// as junk when they arrive anyway.
pub const MAX_FRAME_DEPTH: usize = 4_096;

/// Parses one JSON text without serde_json's recursion limit, growing the stack as it goes
/// (`serde_stacker`); `None` unless it is exactly one JSON value. The caller bounds the depth
/// ([`text_depth`](crate::json::text_depth)) and drops the value without recursion or on a big enough stack.
pub fn parse_unbounded(text: &[u8]) -> Option<Value> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let value = Value::deserialize(serde_stacker::Deserializer::new(&mut de)).ok()?;
    de.end().ok()?;
    Some(value)
}

/// Why a value may not cross the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// It holds `-0`, which JSON cannot carry losslessly.
    Lossy,
    /// It nests deeper than [`MAX_FRAME_DEPTH`].
    TooDeep,
}

/// A JSON value kept as its compact text, as `serde_json` writes it (no whitespace, strings
/// escaped as `serde_json` escapes them, numbers in its shortest form).
///
/// [`RunOutcome::value`](super::RunOutcome::value) holds one: the host keeps a completion as text
/// because text costs the host its bytes once, while a decoded [`Value`] of dense JSON costs tens
/// of times that. Its [`as_str`](Self::as_str) length is what the output ledger charges
/// ([`OutputLedger`](super::OutputLedger)); [`to_value`](Self::to_value) decodes it when a
/// caller needs the tree (`run_code` does only while the tree stays within the text's length
/// plus 16 MiB). It serializes as the JSON value itself, not as a string.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// The compact JSON text of `value`, written without recursion.
    pub fn from_value(value: &Value) -> Self {
        // `compact` writes JSON; `null` only stands for the impossible.
        JsonText(RawValue::from_string(compact(value, false)).unwrap_or_default())
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The text as a `String`, without copying it.
    pub(crate) fn into_string(self) -> String {
        Box::<str>::from(self.0).into_string()
    }

    /// The value decoded into a tree, on a stack grown as deep as it nests. Dense JSON takes
    /// tens of times its text as a [`Value`] (two enum slots per 2-byte array element).
    pub fn to_value(&self) -> Value {
        parse_unbounded(self.as_str().as_bytes()).unwrap_or(Value::Null)
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonText({})", self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for JsonText {}

/// Compares the decoded value, so `JsonText` of `{"a":1}` equals `json!({"a": 1})`.
impl PartialEq<Value> for JsonText {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl From<&Value> for JsonText {
    fn from(value: &Value) -> Self {
        JsonText::from_value(value)
    }
}

/// Why program text could not become a [`JsonText`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not one JSON value (a lone surrogate in a string, a number out of range, junk).
    NotJson,
    /// JSON, but it may not cross the protocol.
    Unfit(Unfit),
}

/// Checks `text` (lossless: no `-0`; at most [`MAX_FRAME_DEPTH`] levels) and rewrites it as
/// compact JSON in one streaming pass: no tree is built and nothing recurses on this stack, so
/// the host holds `text` and its rewrite, about twice its bytes, at the most.
pub fn canonical(text: &[u8]) -> Result<JsonText, Refused> {
    let mut writer = Writer {
        out: Vec::with_capacity(text.len()),
        depth: 0,
        unfit: None,
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let read = DeserializeSeed::deserialize(&mut writer, serde_stacker::Deserializer::new(&mut de))
        .and_then(|()| de.end());
    if let Some(unfit) = writer.unfit {
        return Err(Refused::Unfit(unfit));
    }
    read.map_err(|_| Refused::NotJson)?;
    let text = String::from_utf8(writer.out).map_err(|_| Refused::NotJson)?;
    RawValue::from_string(text)
        .map(JsonText)
        .map_err(|_| Refused::NotJson)
}

/// The streaming rewrite: each visited token is written to `out` as `serde_json` writes it.
struct Writer {
    out: Vec<u8>,
    depth: usize,
    unfit: Option<Unfit>,
}

impl Writer {
    fn refuse<E: serde::de::Error>(&mut self, unfit: Unfit) -> Result<(), E> {
        self.unfit = Some(unfit);
        Err(E::custom("unfit"))
    }

    fn open<E: serde::de::Error>(&mut self, bracket: u8) -> Result<(), E> {
        self.depth += 1;
        if self.depth > MAX_FRAME_DEPTH {
            return self.refuse(Unfit::TooDeep);
        }
        self.out.push(bracket);
        Ok(())
    }

    fn json<E: serde::de::Error, T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), E> {
        serde_json::to_writer(&mut self.out, value).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for &mut Writer {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Writer {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<(), E> {
        self.out
            .extend_from_slice(if b { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<(), E> {
        write!(self.out, "{n}").map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<(), E> {
        write!(self.out, "{n}").map_err(E::custom)
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<(), E> {
        if n == 0.0 && n.is_sign_negative() {
            return self.refuse(Unfit::Lossy);
        }
        self.json(&n)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(), E> {
        self.json(s)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.open(b'[')?;
        let mut first = true;
        loop {
            // A separator is written before knowing whether an element follows, and taken back
            // at the end.
            let mark = self.out.len();
            if !first {
                self.out.push(b',');
            }
            if seq.next_element_seed(&mut *self)?.is_none() {
                self.out.truncate(mark);
                break;
            }
            first = false;
        }
        self.out.push(b']');
        self.depth -= 1;
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.open(b'{')?;
        let mut first = true;
        loop {
            let mark = self.out.len();
            if !first {
                self.out.push(b',');
            }
            if map.next_key_seed(&mut *self)?.is_none() {
                self.out.truncate(mark);
                break;
            }
            self.out.push(b':');
            map.next_value_seed(&mut *self)?;
            first = false;
        }
        self.out.push(b'}');
        self.depth -= 1;
        Ok(())
    }
}

/// Reads `text` as `T` without serde_json's recursion limit (a frame's members are raw text,
/// so reading them does not recurse; the caller bounds the depth).
pub(crate) fn read<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// The members of a JSON object with one of a few known keys, each kept as its raw text (a
/// later duplicate wins, as in a decoded object); other members are skipped. Reading them
/// allocates nothing per member, whatever the object holds.
pub(crate) struct Members<'a> {
    keys: &'static [&'static str],
    raw: Vec<Option<&'a RawValue>>,
}

impl<'a> Members<'a> {
    /// The members of `text` named in `keys`; `None` unless `text` is exactly one JSON object.
    pub(crate) fn of(text: &'a str, keys: &'static [&'static str]) -> Option<Self> {
        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        let raw = serde::Deserializer::deserialize_map(&mut de, Object { keys }).ok()?;
        de.end().ok()?;
        Some(Members { keys, raw })
    }

    /// The raw text of member `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&'a str> {
        let index = self.keys.iter().position(|k| *k == key)?;
        self.raw[index].map(RawValue::get)
    }

    /// Member `key` when it is a string.
    pub(crate) fn string(&self, key: &str) -> Option<String> {
        read(self.get(key)?)
    }
}

/// Reads an object's members for [`Members`].
struct Object {
    keys: &'static [&'static str],
}

impl<'de> Visitor<'de> for Object {
    type Value = Vec<Option<&'de RawValue>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut raw = vec![None; self.keys.len()];
        while let Some(index) = map.next_key_seed(Key { keys: self.keys })? {
            let value: &'de RawValue = map.next_value()?;
            if let Some(index) = index {
                raw[index] = Some(value);
            }
        }
        Ok(raw)
    }
}

/// A member's key: its place among the known keys, compared without allocating.
struct Key {
    keys: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.keys.iter().position(|k| *k == s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_unbounded_takes_exactly_one_value() {
        assert!(parse_unbounded(b"[1] 2").is_none());
        assert_eq!(parse_unbounded(b" [1] "), Some(json!([1])));
    }

    #[test]
    fn rewrites_as_serde_json_writes() {
        for (text, expected) in [
            (" [ 1 , 2.50, \"\\u00e9\\n\" ] ", json!([1, 2.5, "é\n"])),
            (
                "{\"a\" : {\"b\": [true, false, null]}, \"c\": 1e21}",
                json!({"a": {"b": [true, false, null]}, "c": 1e21}),
            ),
            ("-12", json!(-12)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("[[],{}]", json!([[], {}])),
        ] {
            let got = canonical(text.as_bytes()).expect(text);
            assert_eq!(
                got.as_str(),
                serde_json::to_string(&expected).unwrap(),
                "{text}"
            );
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn refuses_what_may_not_cross() {
        assert_eq!(
            canonical(b"[1, -0.0]").unwrap_err(),
            Refused::Unfit(Unfit::Lossy)
        );
        let deep = "[".repeat(MAX_FRAME_DEPTH + 1) + &"]".repeat(MAX_FRAME_DEPTH + 1);
        assert_eq!(
            canonical(deep.as_bytes()).unwrap_err(),
            Refused::Unfit(Unfit::TooDeep)
        );
        let ok = "[".repeat(MAX_FRAME_DEPTH) + &"]".repeat(MAX_FRAME_DEPTH);
        assert_eq!(canonical(ok.as_bytes()).unwrap().as_str(), ok);
        for junk in ["", "[1] 2", "\"\\ud800\"", "1e400", "[1,]"] {
            assert_eq!(
                canonical(junk.as_bytes()).unwrap_err(),
                Refused::NotJson,
                "{junk}"
            );
        }
    }

    #[test]
    fn members_keep_raw_text_and_the_last_duplicate() {
        const KEYS: [&str; 2] = ["a", "b"];
        let members = Members::of(
            r#"{"a": [1, 2], "b": "x", "z": [], "\u0061": {"c": null}}"#,
            &KEYS,
        )
        .unwrap();
        assert_eq!(members.get("a"), Some(r#"{"c": null}"#));
        assert_eq!(members.string("b").as_deref(), Some("x"));
        assert_eq!(members.string("a"), None);
        assert_eq!(members.get("z"), None);
        assert!(Members::of("[1]", &KEYS).is_none());
        assert!(Members::of("{} x", &KEYS).is_none());
        assert!(Members::of(r#"{"a": 1 "b": 2}"#, &KEYS).is_none());
    }
}
