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

mod decoder;
mod host_memory;
mod reply;

pub use super::value_text::MAX_FRAME_DEPTH as MAX_DEPTH;
pub use decoder::FrameDecoder;
pub(crate) use host_memory::decodes_within;
pub use host_memory::{ALLOWANCE_FLOOR, ALLOWANCE_PER_BYTE};
use host_memory::{ALWAYS_AFFORDABLE, call_allowance, decoded_size};
pub(crate) use reply::{reply_failure, reply_ok};

/// Largest integer a call id may be: ids are JavaScript numbers, exact up to 2^53 − 1.
const MAX_CALL_ID: u64 = (1 << 53) - 1;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
