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
//!
//! Host memory per frame: a frame is read as raw members without building a tree; a completion
//! value stays JSON text ([`JsonText`], about its bytes again), a log entry or failure message a
//! string, and only a call's arguments become a [`Value`] tree, refused unless it takes at most
//! [`ALLOWANCE_PER_BYTE`] × the frame's bytes (at least [`ALLOWANCE_FLOOR`]). With the line
//! buffer, a call frame at the frame cap costs the host about 3 × its bytes at the most.

use std::ops::ControlFlow;

use serde_json::Value;

use super::FailureKind;
use super::value_text::{
    JsonText, MAX_FRAME_DEPTH, Members, Refused, Unfit, canonical, parse_unbounded, read,
};
use crate::json::{text_depth, walk};

pub use super::value_text::MAX_FRAME_DEPTH as MAX_DEPTH;

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
    /// A call frame whose arguments would take more than [`ALLOWANCE_PER_BYTE`] × the frame's
    /// bytes (at least [`ALLOWANCE_FLOOR`]) of host memory to decode; it is answered with a
    /// rejection without being decoded.
    Costly {
        /// The call's id.
        id: u64,
    },
}

/// How the program finished, as the child reported it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Completion {
    /// It returned this value, as compact JSON text (`None`: nothing / `undefined`).
    Value(Option<JsonText>),
    /// It failed with a program-level failure: only [`FailureKind::Exception`] and
    /// [`FailureKind::InvalidOutput`] are accepted from the child; limits are the host's.
    Failure {
        /// `exception` or `invalid-output`.
        kind: FailureKind,
        /// The failure text.
        message: String,
    },
}

/// One unit the [`FrameDecoder`] yields. Exhaustive: the engines' worker pool matches every
/// unit as the subprocess runtime does.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// A valid frame.
    Frame(ChildFrame),
    /// A frame longer than the decoder's bound that starts like a completion (a value or a
    /// failure) or a log entry: the program produced more output than the run may return
    /// (`output-limit`).
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
                let limit = self.limit();
                if self.line.len() + chunk.len() <= limit {
                    grow(&mut self.line, chunk.len(), limit);
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
            if prefix.starts_with(br#"{"type":"done","#)
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

/// Makes room for `additional` more bytes in `line`, doubling as a `Vec` does but never past
/// `limit`: a frame just under the limit holds its bytes, not twice them.
fn grow(line: &mut Vec<u8>, additional: usize, limit: usize) {
    let needed = line.len() + additional;
    if needed > line.capacity() {
        let target = needed.max(line.capacity().saturating_mul(2)).min(limit);
        line.reserve_exact(target.max(needed) - line.len());
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

/// Host memory a call's decoded arguments may take per byte of its frame, past
/// [`ALLOWANCE_FLOOR`]: with the frame's own buffer, a call frame at the 1 MiB frame cap costs
/// the host at most about 3 × its bytes (SPEC §8.1: ≤ ~4×).
pub const ALLOWANCE_PER_BYTE: usize = 2;

/// Host memory a call's decoded arguments may always take, bytes, whatever its frame's size:
/// the arguments of any frame up to about 13 KB decode whatever they
/// hold, and small values nested thousands of levels deep do.
pub const ALLOWANCE_FLOOR: usize = 2 << 20;

/// Host memory the arguments of a call frame of `len` bytes may take to decode.
fn call_allowance(len: usize) -> usize {
    len.saturating_mul(ALLOWANCE_PER_BYTE).max(ALLOWANCE_FLOOR)
}

/// The most [`decoded_size`] counts per byte of text: one-element arrays nested in each other
/// (`[[[0]]]`) take 2 bytes a level for a vector of 4 slots; a nested object takes 5 (`{"":`
/// and `}`) for 4 members; string bytes cost one each.
const MOST_PER_BYTE: usize = {
    let array = 4 * std::mem::size_of::<Value>() / 2;
    let object = (4 * MEMBER).div_ceil(5);
    if array > object { array } else { object }
};

/// Arguments up to this long stay within [`call_allowance`] whatever they hold, so their size
/// need not be measured before decoding (a call frame is usually far shorter).
const ALWAYS_AFFORDABLE: usize = (ALLOWANCE_FLOOR - std::mem::size_of::<Value>()) / MOST_PER_BYTE;

/// Whether decoding JSON `text` into a [`Value`] takes at most `bound` bytes of host memory (as
/// [`decoded_size`] counts it); text too short to reach `bound` whatever it holds is not
/// measured. `false` for text that is not JSON.
pub(crate) fn decodes_within(text: &[u8], bound: usize) -> bool {
    text.len() <= bound.saturating_sub(std::mem::size_of::<Value>()) / MOST_PER_BYTE
        || decoded_size(text).is_some_and(|size| size <= bound)
}

/// Depth up to which serde_json's own recursion limit (128) parses a frame on this stack.
const SHALLOW: usize = 64;

/// Keys a frame (or a `done` frame's `error`) may have; others are skipped unread.
const KEYS: [&str; 10] = [
    "type", "id", "global", "name", "args", "text", "value", "error", "kind", "message",
];

/// Decodes one frame (without its newline). Returns `None` for anything that is not a
/// well-formed frame of a known type: invalid UTF-8 or JSON, trailing bytes, values nested more
/// than [`MAX_DEPTH`] levels, a root that is not an object, an unknown `type`, a call whose id is
/// not an integer in 1 ..= 2^53 − 1 or whose global or name is not a string or that has no
/// `args`, a log without string `text`, a done whose `error` is not `{kind, message}` with a
/// child-reportable kind. Unknown extra keys are ignored; the frame is rebuilt from the known
/// ones (the last of a repeated key). A done carrying both `value` and `error` counts as the
/// error. A completion value is kept as compact JSON text, never decoded into a tree.
pub fn decode_child_frame(line: &[u8]) -> Option<ChildFrame> {
    let text = std::str::from_utf8(line).ok()?;
    let depth = text_depth(line);
    if depth > MAX_FRAME_DEPTH + 1 {
        return None;
    }
    let frame = Members::of(text, &KEYS)?;
    match read::<String>(frame.get("type")?)?.as_str() {
        "call" => decode_call(&frame, line.len(), depth),
        "log" => Some(ChildFrame::Log {
            text: frame.string("text")?,
        }),
        "done" => decode_done(&frame),
        _ => None,
    }
}

fn decode_call(frame: &Members<'_>, len: usize, depth: usize) -> Option<ChildFrame> {
    let id = read::<u64>(frame.get("id")?).filter(|id| (1..=MAX_CALL_ID).contains(id))?;
    let global = frame.string("global")?;
    let name = frame.string("name")?;
    let args = frame.get("args")?;
    if args.len() > ALWAYS_AFFORDABLE && decoded_size(args.as_bytes())? > call_allowance(len) {
        return Some(ChildFrame::Costly { id });
    }
    // The parsed tree (and its drop) recurse once per level: give deep ones a big stack.
    with_stack_for(depth, || {
        let args: Value = if depth <= SHALLOW {
            serde_json::from_str(args).ok()?
        } else {
            parse_unbounded(args.as_bytes())?
        };
        let args = inspect(&args).is_ok().then_some(args);
        Some(ChildFrame::Call {
            id,
            global,
            name,
            args,
        })
    })
}

fn decode_done(frame: &Members<'_>) -> Option<ChildFrame> {
    if let Some(error) = frame.get("error") {
        let error = Members::of(error, &KEYS)?;
        let kind = match read::<String>(error.get("kind")?)?.as_str() {
            "exception" => FailureKind::Exception,
            "invalid-output" => FailureKind::InvalidOutput,
            _ => return None,
        };
        let message = error.string("message")?;
        return Some(ChildFrame::Done(Completion::Failure { kind, message }));
    }
    let completion = match frame.get("value") {
        None => Completion::Value(None),
        Some(value) => match canonical(value.as_bytes()) {
            Ok(text) => Completion::Value(Some(text)),
            Err(Refused::Unfit(_)) => Completion::Failure {
                kind: FailureKind::InvalidOutput,
                message: "program completion must be lossless JSON".to_owned(),
            },
            Err(Refused::NotJson) => return None,
        },
    };
    Some(ChildFrame::Done(completion))
}

/// The most slots a vector (or map) of `n` items grown one push at a time holds: none when
/// empty, at least 4, at most twice `n`.
fn capacity(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.saturating_mul(2).max(4)
    }
}

/// Host memory per slot of an object: its entry (hash, key, value) and its index (a `usize` and
/// a control byte).
const MEMBER: usize = 8
    + std::mem::size_of::<String>()
    + std::mem::size_of::<Value>()
    + std::mem::size_of::<usize>()
    + 1;

/// Upper bound of the host memory that decoding `line` into a [`Value`] takes, without
/// building it: per array or object its slots as grown one push at a time ([`capacity`]: at
/// least 4, up to twice its items), plus string bytes. `None` for text that is not JSON.
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
            let mut n = 0;
            while seq.next_element_seed(&mut *self)?.is_some() {
                n += 1;
            }
            self.0 += capacity(n) * std::mem::size_of::<Value>();
            Ok(())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut n = 0;
            while map.next_key_seed(&mut *self)?.is_some() {
                map.next_value_seed(&mut *self)?;
                n += 1;
            }
            self.0 += capacity(n) * MEMBER;
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
pub fn with_stack_for<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    if depth <= SHALLOW {
        f()
    } else {
        stacker::maybe_grow(depth * 1024 + (256 << 10), depth * 2048 + (1 << 20), f)
    }
}

/// Checks that `value` is lossless and at most [`MAX_DEPTH`] deep; returns its depth. Iterative.
pub fn inspect(value: &Value) -> Result<usize, Unfit> {
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
    fn arguments_under_the_affordable_length_cannot_exceed_the_allowance() {
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
                size <= call_allowance(line.len()),
                "{size} bytes for a {}-byte line",
                line.len()
            );
            assert!(
                size > ALLOWANCE_FLOOR / 4,
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
            Some(ChildFrame::Done(Completion::Value(Some(
                JsonText::from_value(&Value::Null)
            ))))
        );
        // A completion is kept as compact text, as serde_json writes it.
        assert_eq!(
            decode(r#"{"type":"done","value": [1.50, "\u00e9"] , "x": [-0.0]}"#),
            Some(ChildFrame::Done(Completion::Value(Some(
                JsonText::from_value(&json!([1.5, "é"]))
            ))))
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
        let call = format!(
            r#"{{"type":"call","id":1,"global":"t","name":"x","args":{}1{}}}"#,
            "[".repeat(MAX_FRAME_DEPTH),
            "]".repeat(MAX_FRAME_DEPTH)
        );
        assert!(matches!(
            decode(&call),
            Some(ChildFrame::Call { args: Some(_), .. })
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
        d.feed(
            b"\"}\n{\"type\":\"done\",\"error\":{\"kind\":\"exception\",\"message\":\"",
            &mut out,
        );
        d.feed(&[b'x'; 200], &mut out);
        d.feed(b"\"}}\n{\"type\":\"done\"}", &mut out);
        d.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Inbound::Frame(ChildFrame::Log { text: "a".into() }),
                Inbound::OutputOverflow,
                Inbound::OutputOverflow,
                Inbound::Frame(ChildFrame::Done(Completion::Value(None))),
            ]
        );
    }

    #[test]
    fn logs_and_completions_of_any_size_are_never_decoded_into_trees() {
        // 16 MiB of dense JSON: tens of times that as a tree, its bytes as text.
        let dense = format!("[{}0]", "0,".repeat(8 << 20));
        let line = format!(r#"{{"type":"done","value":{dense}}}"#);
        let Some(ChildFrame::Done(Completion::Value(Some(text)))) = decode(&line) else {
            panic!("not a value");
        };
        assert_eq!(text.as_str(), dense);
        let text = "a".repeat(20 << 20);
        assert_eq!(
            decode(&format!(r#"{{"type":"log","text":"{text}"}}"#)),
            Some(ChildFrame::Log { text: text.clone() })
        );
        let line =
            format!(r#"{{"type":"done","error":{{"kind":"exception","message":"{text}"}}}}"#);
        assert_eq!(
            decode(&line),
            Some(ChildFrame::Done(Completion::Failure {
                kind: FailureKind::Exception,
                message: text
            }))
        );
    }

    #[test]
    fn call_arguments_decode_within_their_allowance() {
        let call = |args: &str| {
            format!(r#"{{"type":"call","id":9,"global":"t","name":"x","args":{args}}}"#)
        };
        // Strings cost their bytes: a long one decodes.
        let long = format!(r#"["{}"]"#, "s".repeat(1 << 20));
        assert!(matches!(
            decode(&call(&long)),
            Some(ChildFrame::Call { args: Some(_), .. })
        ));
        // Dense numbers cost tens of times their bytes: refused past the allowance.
        let dense = format!("[{}0]", "0,".repeat(64 << 10));
        let line = call(&dense);
        assert!(decoded_size(dense.as_bytes()).unwrap() > call_allowance(line.len()));
        assert_eq!(decode(&line), Some(ChildFrame::Costly { id: 9 }));
    }

    #[test]
    fn a_frame_buffer_never_doubles_past_its_limit() {
        let limit = 3 << 20;
        let mut d = FrameDecoder::new(limit);
        let mut out = Vec::new();
        let text = "a".repeat(limit - 32);
        let line = format!(r#"{{"type":"log","text":"{text}"}}"#);
        for chunk in line.as_bytes().chunks(64 << 10) {
            d.feed(chunk, &mut out);
            assert!(d.line.capacity() <= limit, "{}", d.line.capacity());
        }
        d.feed(b"\n", &mut out);
        assert_eq!(out, vec![Inbound::Frame(ChildFrame::Log { text })]);
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
