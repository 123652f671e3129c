//! Values between the protocol's JSON and Monty: reply frames read straight into program
//! values, and program values written as lossless JSON.

use std::fmt::Write as _;

use monty_types::{DictPairs, MontyObject};
use serde_json::Value;

use dsh_tool_code_mode::code_runtime::frame::MAX_DEPTH as MAX_FRAME_DEPTH;

/// Largest integer that crosses the protocol exactly (JavaScript's safe integers).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The host's reply to one binding call, as the program receives it: its value, or the
/// failure's message and code.
pub(crate) enum BindingReply {
    Ok(MontyObject),
    Err(String, Option<String>),
}

/// A frame as a JSON tree, however deep.
pub(crate) fn parse(line: &[u8]) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    serde::Deserialize::deserialize(&mut de).ok()
}

/// A reply frame: `{"type":"reply","id":N,"ok":true,"value":V}` or
/// `{"type":"reply","id":N,"ok":false,"message":M,"code":C?}`.
pub(crate) fn decode_reply(line: &[u8]) -> Option<(u64, BindingReply)> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let frame = <ReplyFrame as serde::Deserialize>::deserialize(&mut de).ok()?;
    let id = frame.id?.as_u64()?;
    let reply = if frame.ok?.as_bool()? {
        BindingReply::Ok(frame.value.unwrap_or(MontyObject::None))
    } else {
        BindingReply::Err(
            frame.message?.as_str()?.to_owned(),
            frame
                .code
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_owned),
        )
    };
    Some((id, reply))
}

/// The members of a reply frame that matter, the last of each name winning as in a parsed
/// object; the value is read straight into a program value, with no JSON tree in between
/// (a reply is read on every binding call).
#[derive(Default)]
struct ReplyFrame {
    id: Option<Value>,
    ok: Option<Value>,
    value: Option<MontyObject>,
    message: Option<Value>,
    code: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for ReplyFrame {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ReplyFrame;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a reply frame")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ReplyFrame, A::Error> {
                let mut frame = ReplyFrame::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "id" => frame.id = Some(map.next_value()?),
                        "ok" => frame.ok = Some(map.next_value()?),
                        "value" => frame.value = Some(map.next_value_seed(ProgramValue)?),
                        "message" => frame.message = Some(map.next_value()?),
                        "code" => frame.code = Some(map.next_value()?),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(frame)
            }
        }
        d.deserialize_map(Members)
    }
}

/// Reads JSON as the program sees it: `null` is `None`, integers that fit `i64` are ints,
/// other numbers floats, objects dicts (whose keys come once each: the host writes every reply
/// from a parsed value).
struct ProgramValue;

impl<'de> serde::de::DeserializeSeed<'de> for ProgramValue {
    type Value = MontyObject;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<MontyObject, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ProgramValue {
    type Value = MontyObject;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<MontyObject, E> {
        Ok(MontyObject::None)
    }
    fn visit_bool<E>(self, b: bool) -> Result<MontyObject, E> {
        Ok(MontyObject::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<MontyObject, E> {
        Ok(MontyObject::Int(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<MontyObject, E> {
        Ok(i64::try_from(u).map_or(MontyObject::Float(u as f64), MontyObject::Int))
    }
    fn visit_f64<E>(self, f: f64) -> Result<MontyObject, E> {
        Ok(MontyObject::Float(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<MontyObject, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ProgramValue)? {
            items.push(item);
        }
        Ok(MontyObject::List(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<MontyObject, A::Error> {
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<String>()? {
            pairs.push((MontyObject::String(key), map.next_value_seed(ProgramValue)?));
        }
        Ok(MontyObject::Dict(DictPairs::from(pairs)))
    }
}

/// A reply's value as the program sees it, by the rules of [`ProgramValue`].
pub(crate) fn decode(value: &Value) -> MontyObject {
    // Reading a `Value` cannot fail: every JSON value has a program value.
    serde::de::DeserializeSeed::deserialize(ProgramValue, value).unwrap_or(MontyObject::None)
}

/// Why a program value has no lossless JSON.
pub(super) enum Unfit {
    Lossy,
    Deep,
}

/// Lossless JSON of a program value: `None`, booleans, integers within ±(2^53 − 1), finite
/// floats other than −0.0, strings, lists and tuples, dicts with string keys; at most
/// [`MAX_FRAME_DEPTH`] levels.
pub(super) fn encode(value: &MontyObject, out: &mut String, depth: usize) -> Result<(), Unfit> {
    match value {
        MontyObject::None => out.push_str("null"),
        MontyObject::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        MontyObject::Int(i) if i.abs() <= MAX_SAFE_INTEGER => {
            let _ = write!(out, "{i}");
        }
        MontyObject::Float(f) if f.is_finite() && !(*f == 0.0 && f.is_sign_negative()) => {
            match serde_json::Number::from_f64(*f) {
                Some(n) => {
                    let _ = write!(out, "{n}");
                }
                None => return Err(Unfit::Lossy),
            }
        }
        MontyObject::String(s) => push_string(out, s),
        MontyObject::List(items) | MontyObject::Tuple(items) => {
            if depth >= MAX_FRAME_DEPTH {
                return Err(Unfit::Deep);
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(item, out, depth + 1)?;
            }
            out.push(']');
        }
        MontyObject::Dict(pairs) => {
            if depth >= MAX_FRAME_DEPTH {
                return Err(Unfit::Deep);
            }
            out.push('{');
            for (i, (key, item)) in pairs.into_iter().enumerate() {
                let MontyObject::String(key) = key else {
                    return Err(Unfit::Lossy);
                };
                if i > 0 {
                    out.push(',');
                }
                push_string(out, key);
                out.push(':');
                encode(item, out, depth + 1)?;
            }
            out.push('}');
        }
        _ => return Err(Unfit::Lossy),
    }
    Ok(())
}

/// `s` as a JSON string, escaped straight into `out`: a copy of a long string would count
/// against the worker's heap budget.
pub(super) fn push_string(out: &mut String, s: &str) {
    let start = out.len();
    if serde_json::to_writer(Sink(out), s).is_err() {
        out.truncate(start);
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

/// `serde_json`'s writer into a `String`. It writes a string as fragments split before and
/// after each escape, so every fragment is UTF-8 on its own.
struct Sink<'a>(&'a mut String);

impl std::io::Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = std::str::from_utf8(buf).map_err(std::io::Error::other)?;
        self.0.push_str(text);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the reply decoder read before it decoded replies directly: a parsed tree, then
    /// [`decode`].
    fn through_a_tree(line: &[u8]) -> Option<(u64, BindingReply)> {
        let frame = parse(line)?;
        let id = frame.get("id")?.as_u64()?;
        let reply = if frame.get("ok")?.as_bool()? {
            BindingReply::Ok(decode(frame.get("value").unwrap_or(&Value::Null)))
        } else {
            BindingReply::Err(
                frame.get("message")?.as_str()?.to_owned(),
                frame.get("code").and_then(Value::as_str).map(str::to_owned),
            )
        };
        Some((id, reply))
    }

    fn shown(reply: Option<(u64, BindingReply)>) -> String {
        match reply {
            None => "none".to_owned(),
            Some((id, BindingReply::Ok(value))) => format!("{id} ok {value:?}"),
            Some((id, BindingReply::Err(message, code))) => {
                format!("{id} err {message:?} {code:?}")
            }
        }
    }

    #[test]
    fn replies_decode_as_through_a_parsed_tree() {
        let deep = "[".repeat(300) + &"]".repeat(300);
        let lines = [
            r#"{"type":"reply","id":1,"ok":true,"value":{"i":1,"s":"x\u00e9","l":[null,true,1.5]}}"#.to_owned(),
            r#"{"type":"reply","id":2,"ok":true}"#.to_owned(),
            r#"{"type":"reply","id":3,"ok":true,"value":18446744073709551615}"#.to_owned(),
            r#"{"type":"reply","id":4,"ok":true,"value":-9007199254740991}"#.to_owned(),
            r#"{"type":"reply","id":5,"ok":false,"message":"no","code":"E"}"#.to_owned(),
            r#"{"type":"reply","id":6,"ok":false,"message":"no","code":7}"#.to_owned(),
            r#"{"type":"reply","id":7,"ok":false,"code":"E"}"#.to_owned(),
            r#"{"type":"reply","id":"8","ok":true,"value":1}"#.to_owned(),
            r#"{"type":"reply","id":9,"ok":1,"value":1}"#.to_owned(),
            r#"{"id":10,"ok":true,"value":1,"id":11,"value":2,"extra":{"a":[1]}}"#.to_owned(),
            r#"{"type":"reply","id":12,"ok":true,"value":1} x"#.to_owned(),
            r#"[1,2]"#.to_owned(),
            r#"{"type":"reply","id":13,"ok":true,"value":1"#.to_owned(),
            format!(r#"{{"type":"reply","id":14,"ok":true,"value":{deep}}}"#),
        ];
        let value = |line: &str| match decode_reply(line.as_bytes()) {
            Some((_, BindingReply::Ok(value))) => value,
            _ => panic!("not a success reply: {line}"),
        };
        assert!(matches!(value(&lines[1]), MontyObject::None));
        assert!(matches!(value(&lines[2]), MontyObject::Float(f) if f == u64::MAX as f64));
        assert!(matches!(
            value(&lines[3]),
            MontyObject::Int(-9_007_199_254_740_991)
        ));
        assert!(matches!(value(&lines[0]), MontyObject::Dict(_)));
        for line in &lines {
            let (direct, tree) = (
                decode_reply(line.as_bytes()),
                through_a_tree(line.as_bytes()),
            );
            assert_eq!(shown(direct), shown(tree), "{line}");
        }
    }

    #[test]
    fn strings_escape_in_place_as_serde_json_writes_them() {
        for s in [
            "",
            "plain",
            "q\"b\\s/",
            "\u{0}\u{1f}\n\t",
            "é€😀\u{2028}",
            "a\"é\u{7f}z",
        ] {
            let mut out = String::from("[");
            push_string(&mut out, s);
            assert_eq!(
                out,
                format!("[{}", serde_json::to_string(s).unwrap()),
                "{s:?}"
            );
        }
    }
}
