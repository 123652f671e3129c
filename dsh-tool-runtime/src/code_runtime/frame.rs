//! The host side of the child protocol: newline-delimited JSON frames on a dedicated pipe pair
//! (the child writes on its fd 3 and reads on its fd 4; stdout and stderr stay the program's).
//!
//! Child → host: `{"type":"call","id":N,"global":G,"name":B,"args":V}`,
//! `{"type":"log","text":T}`, `{"type":"done"}` / `{"type":"done","value":V}` /
//! `{"type":"done","error":{"kind":"exception"|"invalid-output","message":M}}`.
//! Host → child: one `{"type":"run",...}` frame, then `{"type":"reply","id":N,"ok":true,"value":V}`
//! or `{"type":"reply","id":N,"ok":false,"message":M}` per call.
//!
//! The program shares a process with the bootstrap that writes these frames, so every inbound
//! byte is hostile: [`FrameDecoder`] bounds each frame's size and nesting, shape-checks it,
//! rebuilds it into a [`ChildFrame`] and silently drops anything else. Nothing it is fed can make
//! it panic, allocate beyond its bound, or recurse without a bound.

use std::ops::ControlFlow;

use serde_json::Value;

use super::FailureKind;
use crate::json::{MAX_FRAME_DEPTH, parse_unbounded, text_depth, walk};

pub use crate::json::MAX_FRAME_DEPTH as MAX_DEPTH;

/// Largest integer a call id may be: ids are JavaScript numbers, exact up to 2^53 − 1.
const MAX_CALL_ID: u64 = (1 << 53) - 1;

/// How much of an oversized frame is kept to recognise what it was (and a call's id).
const OVERSIZE_PREFIX: usize = 48;

/// How the bootstrap starts every call frame.
const CALL_PREFIX: &[u8] = br#"{"type":"call","id":"#;

/// A frame from the child, rebuilt from a validated wire frame.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ChildFrame {
    /// The program called a binding. `args` is `None` when the arguments were not lossless
    /// JSON (`-0`), which the host answers with a failure reply.
    Call {
        /// The child-issued call id (1 ..= 2^53 − 1).
        id: u64,
        /// The namespace's global.
        global: String,
        /// The binding name.
        name: String,
        /// The arguments, if lossless.
        args: Option<Value>,
    },
    /// One log entry.
    Log {
        /// The entry's text.
        text: String,
    },
    /// The program finished.
    Done(Completion),
    /// A call frame whose arguments would take more than 4 × the frame's bytes (plus 1 MiB) of
    /// host memory to decode; it is answered with a rejection without being decoded.
    Costly {
        /// The call's id.
        id: u64,
    },
}

/// How the program finished, as the child reported it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Completion {
    /// It returned this value (`None`: nothing / `undefined`).
    Value(Option<Value>),
    /// It failed with a program-level failure: only [`FailureKind::Exception`] and
    /// [`FailureKind::InvalidOutput`] are accepted from the child; limits are the host's.
    Failure {
        /// `exception` or `invalid-output`.
        kind: FailureKind,
        /// The failure text.
        message: String,
    },
}

/// One unit the [`FrameDecoder`] yields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Inbound {
    /// A valid frame.
    Frame(ChildFrame),
    /// A frame longer than the decoder's bound that starts like a completion value or a log
    /// entry: the program produced more output than the run may return (`output-limit`).
    /// Other oversized frames are dropped.
    OutputOverflow,
    /// A call frame longer than the decoder's call limit, in the bootstrap's own layout (type
    /// and id first), so that the call can be answered with a rejection.
    OversizedCall {
        /// The call's id.
        id: u64,
    },
}

/// Splits the child's protocol stream into frames and decodes them.
///
/// Feed it bytes in any chunking with [`feed`](Self::feed); each complete line is decoded with
/// [`decode_child_frame`]. A line longer than `max_frame_bytes` is never buffered beyond that
/// bound: the rest of it is skipped up to the next newline.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
    max_call_bytes: usize,
    line: Vec<u8>,
    oversize: Option<Vec<u8>>,
}

impl FrameDecoder {
    /// A decoder whose frames may be at most `max_frame_bytes` long (newline excluded).
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder {
            max_frame_bytes,
            max_call_bytes: max_frame_bytes,
            line: Vec::new(),
            oversize: None,
        }
    }

    /// Bounds call frames more tightly: a line that starts as a call frame
    /// (`{"type":"call","id":`) is not buffered past `max_call_bytes`; it yields
    /// [`Inbound::OversizedCall`].
    pub fn with_call_limit(mut self, max_call_bytes: usize) -> Self {
        self.max_call_bytes = max_call_bytes.min(self.max_frame_bytes);
        self
    }

    fn limit(&self) -> usize {
        if self.line.starts_with(CALL_PREFIX) {
            self.max_call_bytes
        } else {
            self.max_frame_bytes
        }
    }

    /// Decodes every line `bytes` completes, appending the results to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Inbound>) {
        while !bytes.is_empty() {
            let (chunk, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.oversize.is_none() {
                // The call limit applies once the line is long enough to show its prefix.
                let head = CALL_PREFIX
                    .len()
                    .saturating_sub(self.line.len())
                    .min(chunk.len());
                self.line.extend_from_slice(&chunk[..head]);
                let chunk = &chunk[head..];
                if self.line.len() + chunk.len() <= self.limit() {
                    self.line.extend_from_slice(chunk);
                } else {
                    let mut prefix = std::mem::take(&mut self.line);
                    prefix.extend_from_slice(&chunk[..chunk.len().min(OVERSIZE_PREFIX)]);
                    prefix.truncate(OVERSIZE_PREFIX);
                    self.oversize = Some(prefix);
                }
            }
            if complete {
                self.end_line(out);
            }
        }
    }

    /// Ends the stream: a final line without a newline is decoded too.
    pub fn finish(&mut self, out: &mut Vec<Inbound>) {
        if !self.line.is_empty() || self.oversize.is_some() {
            self.end_line(out);
        }
    }

    fn end_line(&mut self, out: &mut Vec<Inbound>) {
        if let Some(prefix) = self.oversize.take() {
            if prefix.starts_with(br#"{"type":"done","value":"#)
                || prefix.starts_with(br#"{"type":"log","text":"#)
            {
                out.push(Inbound::OutputOverflow);
            } else if let Some(id) = call_id(&prefix) {
                out.push(Inbound::OversizedCall { id });
            }
        } else if let Some(frame) = decode_child_frame(&self.line) {
            out.push(Inbound::Frame(frame));
        }
        self.line.clear();
        // Keep the buffer's capacity for the next frame, but not a huge one from a past frame.
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
    }
}

/// The id of a call frame from its first bytes, `{"type":"call","id":N,`.
fn call_id(prefix: &[u8]) -> Option<u64> {
    let rest = prefix.strip_prefix(CALL_PREFIX)?;
    let end = rest.iter().position(|&b| b == b',')?;
    let digits = std::str::from_utf8(&rest[..end]).ok()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|id| (1..=MAX_CALL_ID).contains(id))
}

/// Host memory a decoded frame may take, bytes. An absolute bound, not a ratio: an ordinary
/// array of numbers takes ~10 times its text as values, so a ratio refused plain results of a
/// few hundred KB; this bound lets any frame up to [`ALWAYS_AFFORDABLE`] bytes (~384 KiB)
/// decode, whatever it holds, and a longer one as far as its decoded size stays under it.
pub(crate) const DECODE_LIMIT: usize = 12 << 20;

/// The most [`decoded_size`] counts per byte of text: an array element costs two `Value` slots
/// and takes at least 2 bytes (`0,`); an object member costs two slots, a key and a map slot
/// and takes at least 5 bytes (`"":0,`); string bytes cost one each.
const MOST_PER_BYTE: usize = {
    let slot = std::mem::size_of::<Value>();
    let member = (2 * (slot + std::mem::size_of::<String>() + 16)).div_ceil(5);
    if slot > member { slot } else { member }
};

/// Lines up to this long stay within [`DECODE_LIMIT`] whatever they hold, so their size need
/// not be measured before decoding (a call frame is usually far shorter).
const ALWAYS_AFFORDABLE: usize = (DECODE_LIMIT - std::mem::size_of::<Value>()) / MOST_PER_BYTE;

/// Depth up to which serde_json's own recursion limit (128) parses a frame on this stack.
const SHALLOW: usize = 64;

/// Decodes one frame (without its newline). Returns `None` for anything that is not a
/// well-formed frame of a known type: invalid UTF-8 or JSON, trailing bytes, values nested more
/// than [`MAX_DEPTH`] levels, a root that is not an object, an unknown `type`, a call whose id is
/// not an integer in 1 ..= 2^53 − 1 or whose global or name is not a string or that has no
/// `args`, a log without string `text`, a done whose `error` is not `{kind, message}` with a
/// child-reportable kind. Unknown extra keys are ignored; the frame is rebuilt from the known
/// ones. A done carrying both `value` and `error` counts as the error.
pub fn decode_child_frame(line: &[u8]) -> Option<ChildFrame> {
    std::str::from_utf8(line).ok()?;
    let depth = text_depth(line);
    if depth > MAX_FRAME_DEPTH + 1 {
        return None;
    }
    // The parsed tree (and its drop) recurse once per level: give deep ones a big stack.
    with_stack_for(depth, || {
        if line.len() > ALWAYS_AFFORDABLE && decoded_size(line)? > DECODE_LIMIT {
            return Some(too_costly(line));
        }
        let root = if depth <= SHALLOW {
            serde_json::from_slice(line).ok()?
        } else {
            parse_unbounded(line)?
        };
        rebuild(root)
    })
}

/// What stands for a frame that is valid JSON but would take too much host memory to decode:
/// a rejection of the call, or an `invalid-output` completion.
fn too_costly(line: &[u8]) -> ChildFrame {
    match call_id(&line[..line.len().min(OVERSIZE_PREFIX)]) {
        Some(id) => ChildFrame::Costly { id },
        None => ChildFrame::Done(Completion::Failure {
            kind: FailureKind::InvalidOutput,
            message: format!(
                "program completion would take more than {} MiB of host memory to decode",
                DECODE_LIMIT >> 20
            ),
        }),
    }
}

/// Upper bound of the host memory that decoding `line` into a [`Value`] takes, without
/// building it: per value its enum slot (twice, for vector growth), per member its key and map
/// slot, plus string bytes. `None` for text that is not JSON.
fn decoded_size(line: &[u8]) -> Option<usize> {
    struct Cost(usize);
    impl<'de> serde::de::DeserializeSeed<'de> for &mut Cost {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> serde::de::Visitor<'de> for &mut Cost {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, s: &str) -> Result<(), E> {
            self.0 += s.len();
            Ok(())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(&mut *self)?.is_some() {
                self.0 += 2 * std::mem::size_of::<Value>();
            }
            Ok(())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_key_seed(&mut *self)?.is_some() {
                map.next_value_seed(&mut *self)?;
                self.0 += 2 * (std::mem::size_of::<Value>() + std::mem::size_of::<String>() + 16);
            }
            Ok(())
        }
    }
    let mut cost = Cost(0);
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    serde::de::DeserializeSeed::deserialize(&mut cost, serde_stacker::Deserializer::new(&mut de))
        .ok()?;
    Some(cost.0 + std::mem::size_of::<Value>())
}

/// Runs `f` on a stack sized for values `depth` levels deep.
pub(crate) fn with_stack_for<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    if depth <= SHALLOW {
        f()
    } else {
        stacker::maybe_grow(depth * 1024 + (256 << 10), depth * 2048 + (1 << 20), f)
    }
}

fn rebuild(root: Value) -> Option<ChildFrame> {
    let Value::Object(mut map) = root else {
        return None;
    };
    match map.get("type")?.as_str()? {
        "call" => {
            let id = map
                .get("id")?
                .as_u64()
                .filter(|id| (1..=MAX_CALL_ID).contains(id))?;
            let global = take_string(&mut map, "global")?;
            let name = take_string(&mut map, "name")?;
            let args = map.remove("args")?;
            let args = inspect(&args).is_ok().then_some(args);
            Some(ChildFrame::Call {
                id,
                global,
                name,
                args,
            })
        }
        "log" => Some(ChildFrame::Log {
            text: take_string(&mut map, "text")?,
        }),
        "done" => {
            if let Some(error) = map.remove("error") {
                let Value::Object(mut error) = error else {
                    return None;
                };
                let kind = match error.get("kind")?.as_str()? {
                    "exception" => FailureKind::Exception,
                    "invalid-output" => FailureKind::InvalidOutput,
                    _ => return None,
                };
                let message = take_string(&mut error, "message")?;
                return Some(ChildFrame::Done(Completion::Failure { kind, message }));
            }
            match map.remove("value") {
                None => Some(ChildFrame::Done(Completion::Value(None))),
                Some(value) if inspect(&value).is_ok() => {
                    Some(ChildFrame::Done(Completion::Value(Some(value))))
                }
                Some(_) => Some(ChildFrame::Done(Completion::Failure {
                    kind: FailureKind::InvalidOutput,
                    message: "program completion must be lossless JSON".to_owned(),
                })),
            }
        }
        _ => None,
    }
}

fn take_string(map: &mut serde_json::Map<String, Value>, key: &str) -> Option<String> {
    match map.remove(key)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Why a value may not cross the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unfit {
    /// It holds `-0`, which JSON cannot carry losslessly.
    Lossy,
    /// It nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// Checks that `value` is lossless and at most [`MAX_DEPTH`] deep; returns its depth. Iterative.
pub(crate) fn inspect(value: &Value) -> Result<usize, Unfit> {
    let mut deepest = 0;
    let unfit = walk(value, |node, level| match node {
        Value::Number(n)
            if n.is_f64() && n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()) =>
        {
            ControlFlow::Break(Unfit::Lossy)
        }
        Value::Array(_) | Value::Object(_) => {
            deepest = deepest.max(level);
            if level > MAX_FRAME_DEPTH {
                ControlFlow::Break(Unfit::TooDeep)
            } else {
                ControlFlow::Continue(())
            }
        }
        _ => ControlFlow::Continue(()),
    });
    match unfit {
        ControlFlow::Break(unfit) => Err(unfit),
        ControlFlow::Continue(()) => Ok(deepest),
    }
}

/// Appends `value` as compact JSON, on a stack sized for its `depth`.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) {
    with_stack_for(depth, || {
        // Writing a `Value` into a Vec cannot fail: its keys are strings and numbers finite.
        if serde_json::to_writer(&mut *out, value).is_err() {
            out.extend_from_slice(b"null");
        }
    });
}

/// A success reply frame for call `id`; `depth` is the value's depth from [`inspect`].
pub(crate) fn reply_ok(id: u64, value: &Value, depth: usize) -> Vec<u8> {
    let mut out = format!(r#"{{"type":"reply","id":{id},"ok":true,"value":"#).into_bytes();
    write_value(&mut out, value, depth);
    out.extend_from_slice(b"}\n");
    out
}

/// A failure reply frame for call `id` with the failure's code (`"code"` only when there is one).
pub(crate) fn reply_failure(id: u64, message: &str, code: Option<&str>) -> Vec<u8> {
    let mut frame = serde_json::json!({
        "type": "reply", "id": id, "ok": false, "message": message,
    });
    if let Some(code) = code {
        frame["code"] = Value::from(code);
    }
    let mut out = serde_json::to_vec(&frame).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_under_the_affordable_length_cannot_exceed_the_allowance() {
        let fill = |open: &str, item: &str, close: &str| {
            let mut line = String::from(open);
            while line.len() + item.len() + close.len() < ALWAYS_AFFORDABLE {
                line.push_str(item);
            }
            line.pop();
            line.push_str(close);
            line
        };
        for line in [
            fill("[", "0,", "]"),
            fill("[", "[],", "]"),
            fill("{", r#""":0,"#, "}"),
            fill("[", r#""","#, "]"),
        ] {
            assert!(line.len() <= ALWAYS_AFFORDABLE);
            let size = decoded_size(line.as_bytes()).expect("JSON");
            assert!(
                size <= DECODE_LIMIT,
                "{size} bytes for a {}-byte line",
                line.len()
            );
            assert!(
                size > DECODE_LIMIT / 4,
                "the worst cases come near the allowance"
            );
        }
    }

    #[test]
    fn shallow_and_deep_frames_decode_alike() {
        let args = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
        for depth in [SHALLOW - 2, SHALLOW - 1, SHALLOW, SHALLOW + 1, 200] {
            let line = format!(
                r#"{{"type":"call","id":3,"global":"tools","name":"x","args":{}}}"#,
                args(depth)
            );
            let Some(ChildFrame::Call {
                args: Some(value), ..
            }) = decode(&line)
            else {
                panic!("depth {depth}: not decoded");
            };
            assert_eq!(
                Some(value),
                parse_unbounded(args(depth).as_bytes()),
                "depth {depth}"
            );
            assert_eq!(
                decode(&format!("{line} x")),
                None,
                "depth {depth}: trailing bytes"
            );
        }
    }

    fn decode(s: &str) -> Option<ChildFrame> {
        decode_child_frame(s.as_bytes())
    }

    #[test]
    fn accepts_well_formed_frames() {
        assert_eq!(
            decode(
                r#"{"type":"call","id":1,"global":"tools","name":"x","args":{"a":[1]},"extra":0}"#
            ),
            Some(ChildFrame::Call {
                id: 1,
                global: "tools".into(),
                name: "x".into(),
                args: Some(json!({"a": [1]})),
            })
        );
        assert_eq!(
            decode(r#"{"type":"log","text":"hi"}"#),
            Some(ChildFrame::Log { text: "hi".into() })
        );
        assert_eq!(
            decode(r#"{"type":"done"}"#),
            Some(ChildFrame::Done(Completion::Value(None)))
        );
        assert_eq!(
            decode(r#"{"type":"done","value":null}"#),
            Some(ChildFrame::Done(Completion::Value(Some(Value::Null))))
        );
        assert_eq!(
            decode(r#"{"type":"done","value":1,"error":{"kind":"exception","message":"m"}}"#),
            Some(ChildFrame::Done(Completion::Failure {
                kind: FailureKind::Exception,
                message: "m".into()
            }))
        );
    }

    #[test]
    fn drops_junk() {
        for junk in [
            "",
            "null",
            "[]",
            "\"call\"",
            r#"{"type":"nope"}"#,
            r#"{"type":"call","id":"1","global":"t","name":"x","args":1}"#,
            r#"{"type":"call","id":0,"global":"t","name":"x","args":1}"#,
            r#"{"type":"call","id":1.5,"global":"t","name":"x","args":1}"#,
            r#"{"type":"call","id":-3,"global":"t","name":"x","args":1}"#,
            r#"{"type":"call","id":9007199254740992,"global":"t","name":"x","args":1}"#,
            r#"{"type":"call","id":1,"global":1,"name":"x","args":1}"#,
            r#"{"type":"call","id":1,"global":"t","name":"x"}"#,
            r#"{"type":"log","text":5}"#,
            r#"{"type":"done","error":{"kind":"timeout","message":"compute budget exhausted"}}"#,
            r#"{"type":"done","error":{"kind":"output-limit","message":"x"}}"#,
            r#"{"type":"done","error":"x"}"#,
            r#"{"type":"log","text":"a"} trailing"#,
            "{\"type\":\"log\",\"text\":\"\\ud800\"}",
        ] {
            assert_eq!(decode(junk), None, "{junk}");
        }
        assert_eq!(
            decode_child_frame(b"{\"type\":\"log\",\"text\":\"\xff\"}"),
            None
        );
    }

    #[test]
    fn marks_negative_zero() {
        assert_eq!(
            decode(r#"{"type":"call","id":2,"global":"t","name":"x","args":[-0.0]}"#),
            Some(ChildFrame::Call {
                id: 2,
                global: "t".into(),
                name: "x".into(),
                args: None
            })
        );
        assert!(matches!(
            decode(r#"{"type":"done","value":{"a":-0.0}}"#),
            Some(ChildFrame::Done(Completion::Failure {
                kind: FailureKind::InvalidOutput,
                ..
            }))
        ));
    }

    #[test]
    fn bounds_depth() {
        let ok = format!(
            r#"{{"type":"done","value":{}1{}}}"#,
            "[".repeat(MAX_FRAME_DEPTH),
            "]".repeat(MAX_FRAME_DEPTH)
        );
        assert!(matches!(
            decode(&ok),
            Some(ChildFrame::Done(Completion::Value(Some(_))))
        ));
        let deep = format!(
            r#"{{"type":"done","value":{}1{}}}"#,
            "[".repeat(MAX_FRAME_DEPTH + 1),
            "]".repeat(MAX_FRAME_DEPTH + 1)
        );
        assert_eq!(decode(&deep), None);
        let huge = "[".repeat(1 << 20);
        assert_eq!(decode(&huge), None);
    }

    #[test]
    fn splits_and_bounds_lines() {
        let mut d = FrameDecoder::new(64);
        let mut out = Vec::new();
        d.feed(b"{\"type\":\"log\",\"te", &mut out);
        d.feed(
            b"xt\":\"a\"}\njunk\n{\"type\":\"log\",\"text\":\"",
            &mut out,
        );
        d.feed(&[b'x'; 200], &mut out);
        d.feed(b"\"}\n{\"type\":\"done\"}", &mut out);
        d.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Inbound::Frame(ChildFrame::Log { text: "a".into() }),
                Inbound::OutputOverflow,
                Inbound::Frame(ChildFrame::Done(Completion::Value(None))),
            ]
        );
    }

    #[test]
    fn replies_are_valid_json() {
        let v = json!({"a": [1, "x\n"]});
        let ok = reply_ok(7, &v, inspect(&v).unwrap());
        assert_eq!(
            serde_json::from_slice::<Value>(&ok).unwrap(),
            json!({"type":"reply","id":7,"ok":true,"value":v})
        );
        let err = reply_failure(8, "bad \"x\"", None);
        assert_eq!(
            serde_json::from_slice::<Value>(&err).unwrap(),
            json!({"type":"reply","id":8,"ok":false,"message":"bad \"x\""})
        );
    }
}
