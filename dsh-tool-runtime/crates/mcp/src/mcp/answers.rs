//! `tools/call` answers read straight as `CallToolResult` on the stdio transport.
//!
//! rmcp parses every incoming line through its untagged message and result enums: it buffers
//! the line and tries the message kinds and then the result types in turn (`CallToolResult` is
//! the sixteenth), building and dropping a `serde_json` error for each miss — about a third of
//! the host's work per call. The bridge knows which request ids it sent as `tools/call`
//! ([`CallAnswers::sent`], from the transport's `send`); the stdio reader parses a line answering
//! one of them as exactly `{jsonrpc, id, result}` with a `CallToolResult` result (no key but
//! `CallToolResult`'s own: rmcp reads a result with another type's key as that type) and keeps
//! the typed message here instead of passing the line on, and the transport's `receive` hands it
//! to rmcp ([`ProgressTap`](super::progress::ProgressTap)). Only a line read when every earlier
//! line has reached rmcp is taken, and the reader passes nothing on while an answer waits, so the
//! answers keep their place among the server's messages. Anything else (another key, a result
//! that is no `CallToolResult`, an id not sent as `tools/call`) goes to rmcp unchanged, so what
//! rmcp would refuse it still refuses. An answer that is no JSON at all, which rmcp would drop
//! (its call waiting for the timeout), is reported ([`Take::Broken`]) and fails its call at once.

use std::collections::{HashSet, VecDeque};

use parking_lot::Mutex;
use rmcp::model::{
    CallToolResult, JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::error::Category;

/// `tools/call` ids remembered at most; an older one forgotten only loses the fast path.
const REMEMBERED_IDS: usize = 4096;

/// `tools/list` ids remembered at most: one list is read at a time, page after page.
const REMEMBERED_LISTS: usize = 16;

/// What [`CallAnswers::take_line`] did with a line.
#[derive(Debug, PartialEq)]
pub(crate) enum Take {
    /// Parsed and kept for rmcp: the line goes no further.
    Taken,
    /// Left to rmcp.
    Left,
    /// Not JSON (bad UTF-8, a lone surrogate, a cut text): why.
    Broken(String),
}

/// The `tools/call` ids in flight and the answers parsed for them, waiting for rmcp.
#[derive(Default)]
pub(crate) struct CallAnswers {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    ids: HashSet<RequestId>,
    /// `ids` in the order they were sent, for the bound.
    order: VecDeque<RequestId>,
    answers: VecDeque<ServerJsonRpcMessage>,
    /// `tools/list` ids sent, newest last, for the page size limit.
    lists: VecDeque<RequestId>,
    /// Answers parsed so far (tests read it).
    parsed: usize,
}

/// One answer line exactly as a `tools/call` answer reads: no other field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallAnswer {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    result: CallToolResult,
}

/// The keys of a [`CallAnswer`] and of its result, values skipped. `CallToolResult` ignores
/// unknown keys, but rmcp tries other result types first, and a result with one of their keys
/// (`tools`, `contents`, `action`, …) reads as that type there: only a result with no key but
/// `CallToolResult`'s own is taken, so that it reads as rmcp reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallAnswerKeys {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: IgnoredAny,
    #[serde(rename = "id")]
    _id: IgnoredAny,
    #[serde(rename = "result")]
    _result: CallResultKeys,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallResultKeys {
    #[serde(rename = "resultType")]
    _result_type: Option<IgnoredAny>,
    #[serde(rename = "content")]
    _content: Option<IgnoredAny>,
    #[serde(rename = "structuredContent")]
    _structured_content: Option<IgnoredAny>,
    #[serde(rename = "isError")]
    _is_error: Option<IgnoredAny>,
    #[serde(rename = "_meta")]
    _meta: Option<IgnoredAny>,
}

impl CallAnswers {
    /// Remembers that request `id` was sent as `tools/call`.
    pub(crate) fn sent(&self, id: RequestId) {
        let mut state = self.state.lock();
        if state.order.len() == REMEMBERED_IDS
            && let Some(oldest) = state.order.pop_front()
        {
            state.ids.remove(&oldest);
        }
        state.ids.insert(id.clone());
        state.order.push_back(id);
    }

    /// Remembers that request `id` was sent as `tools/list`.
    pub(crate) fn list_sent(&self, id: RequestId) {
        let mut state = self.state.lock();
        if state.lists.len() == REMEMBERED_LISTS {
            state.lists.pop_front();
        }
        state.lists.push_back(id);
    }

    /// `true` when `id` was sent as `tools/list` (and forgets it).
    pub(crate) fn is_list(&self, id: &RequestId) -> bool {
        let mut state = self.state.lock();
        let before = state.lists.len();
        state.lists.retain(|list| list != id);
        state.lists.len() != before
    }

    /// Ends the fast path of `id` (its answer was read another way, or cannot be read); `true`
    /// when it was a `tools/call` in flight.
    pub(crate) fn forget(&self, id: &RequestId) -> bool {
        self.state.lock().ids.remove(id)
    }

    /// Takes `line` (one JSON text) when `may_take` and it answers a `tools/call` in flight.
    /// A line that is no JSON at all ([`Take::Broken`]: rmcp would drop it, and the call wait
    /// for its timeout) is reported whatever `may_take` says.
    pub(crate) fn take_line(&self, line: &[u8], may_take: bool) -> Take {
        if self.state.lock().ids.is_empty() {
            return Take::Left;
        }
        let broken = |error: serde_json::Error| match error.classify() {
            Category::Syntax | Category::Eof => Take::Broken(error.to_string()),
            Category::Data | Category::Io => Take::Left,
        };
        if let Err(error) = serde_json::from_slice::<CallAnswerKeys>(line) {
            return broken(error);
        }
        if !may_take {
            // Skipped values are checked neither for UTF-8 nor for the surrogates of `\u`
            // escapes, which rmcp's parse refuses: bad bytes are looked for here, and a line with
            // a surrogate escape (rare) gets the full parse.
            if let Err(error) = std::str::from_utf8(line) {
                return Take::Broken(error.to_string());
            }
            if !has_surrogate_escape(line) {
                return Take::Left;
            }
            return match serde_json::from_slice::<CallAnswer>(line) {
                Ok(_) => Take::Left,
                Err(error) => broken(error),
            };
        }
        let answer = match serde_json::from_slice::<CallAnswer>(line) {
            Ok(answer) => answer,
            Err(error) => return broken(error),
        };
        let mut state = self.state.lock();
        if !state.ids.remove(&answer.id) {
            return Take::Left;
        }
        state.parsed += 1;
        state
            .answers
            .push_back(ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: answer.jsonrpc,
                id: answer.id,
                result: ServerResult::CallToolResult(answer.result),
            }));
        Take::Taken
    }

    /// An answer taken and not handed on yet.
    pub(crate) fn waiting(&self) -> bool {
        !self.state.lock().answers.is_empty()
    }

    /// The oldest answer taken and not handed on yet.
    pub(crate) fn next(&self) -> Option<ServerJsonRpcMessage> {
        self.state.lock().answers.pop_front()
    }

    /// `tools/call` ids sent and not answered yet.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.state.lock().ids.len()
    }

    /// Answers parsed here so far.
    #[cfg(test)]
    pub(crate) fn parsed_so_far(&self) -> usize {
        self.state.lock().parsed
    }
}

/// Whether `line` holds a `\uD800`–`\uDFFF` escape (or what looks like one after an escaped
/// backslash: that only costs a parse).
fn has_surrogate_escape(line: &[u8]) -> bool {
    line.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && matches!(w[2], b'd' | b'D')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn id(n: i64) -> RequestId {
        NumberOrString::Number(n)
    }

    /// The answers of the real servers the tests use, in the shapes they send.
    const ANSWERS: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#,
        r#"{"result":{"content":[{"type":"image","data":"iVBO","mimeType":"image/png"}]},"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],"structuredContent":{"temperature":22.5},"isError":false}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"resource_link","uri":"test://a","name":"a"},{"type":"resource","resource":{"uri":"test://b","text":"b"}}],"_meta":{"k":1}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}"#,
    ];

    /// What rmcp makes of a line.
    fn rmcp_reads(line: &[u8]) -> ServerJsonRpcMessage {
        serde_json::from_slice(line).expect("rmcp parses it")
    }

    /// rmcp's messages have no `PartialEq`: compared as what they write.
    fn written(message: &ServerJsonRpcMessage) -> serde_json::Value {
        serde_json::to_value(message).unwrap()
    }

    fn take(answers: &CallAnswers, line: &str) -> bool {
        answers.take_line(line.as_bytes(), true) == Take::Taken
    }

    #[test]
    fn a_call_answer_reads_as_rmcp_reads_it() {
        for line in ANSWERS {
            let answers = CallAnswers::default();
            answers.sent(id(1));
            assert!(take(&answers, line), "{line}");
            assert!(answers.waiting());
            let ours = answers.next().expect("parsed");
            assert_eq!(
                written(&ours),
                written(&rmcp_reads(line.as_bytes())),
                "{line}"
            );
            assert!(matches!(
                ours,
                ServerJsonRpcMessage::Response(JsonRpcResponse {
                    result: ServerResult::CallToolResult(_),
                    ..
                })
            ));
            assert!(!answers.waiting());
        }
    }

    /// Every combination of `CallToolResult`'s own keys, with each key's usual and odd values:
    /// whatever the fast path takes, rmcp reads as the same `CallToolResult`.
    #[test]
    fn every_result_taken_reads_as_rmcp_reads_it() {
        let values: [(&str, &[&str]); 5] = [
            ("content", &[r#"[{"type":"text","text":"t"}]"#, "[]"]),
            ("structuredContent", &[r#"{"a":1}"#, "null", "[1]", "\"s\""]),
            ("isError", &["true", "false", "null"]),
            ("_meta", &[r#"{"k":1}"#]),
            ("resultType", &[r#""complete""#, r#""input_required""#]),
        ];
        let mut results = vec![String::new()];
        for (key, options) in values {
            let mut next = Vec::new();
            for result in &results {
                next.push(result.clone());
                for value in options {
                    let comma = if result.is_empty() { "" } else { "," };
                    next.push(format!(r#"{result}{comma}"{key}":{value}"#));
                }
            }
            results = next;
        }
        let mut taken = 0;
        for result in results {
            let line = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{{result}}}}}"#);
            let answers = CallAnswers::default();
            answers.sent(id(1));
            if !take(&answers, &line) {
                continue;
            }
            taken += 1;
            let ours = answers.next().expect("parsed");
            let rmcp = rmcp_reads(line.as_bytes());
            assert!(
                matches!(
                    &rmcp,
                    ServerJsonRpcMessage::Response(JsonRpcResponse {
                        result: ServerResult::CallToolResult(_),
                        ..
                    })
                ),
                "{line}"
            );
            assert_eq!(written(&ours), written(&rmcp), "{line}");
        }
        assert!(taken > 100, "{taken}");
    }

    #[test]
    fn other_lines_are_left_to_rmcp() {
        let answers = CallAnswers::default();
        answers.sent(id(1));
        let left = [
            // Not sent as `tools/call`.
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#,
            // A stray field rmcp refuses.
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"x"}}"#,
            // An error answer.
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool"}}"#,
            // No known `CallToolResult` field.
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
            // A key of a result type rmcp tries before `CallToolResult`: rmcp reads these as
            // that type (and the call fails), so they must not read as a call's answer here.
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"contents":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"prompts":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"messages":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"action":"accept"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"anything":1}}"#,
            // Another protocol version.
            r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#,
            // A notification.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
        ];
        for line in left {
            assert!(!take(&answers, line), "{line}");
        }
        assert!(!answers.waiting());
        // The id is still in flight: its real answer takes the fast path, once.
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert!(take(&answers, answer));
        assert!(!take(&answers, answer));
    }

    /// A line that is no JSON is reported, taken or not; one that is JSON but must wait for
    /// earlier lines is left to rmcp, a valid surrogate pair included.
    #[test]
    fn broken_lines_are_reported() {
        let answers = CallAnswers::default();
        answers.sent(id(1));
        let bad_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe\"}]}}";
        let broken: [&[u8]; 4] = [
            bad_utf8,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\ud800"}]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":["#,
            b"not json",
        ];
        for line in broken {
            for may_take in [true, false] {
                assert!(
                    matches!(answers.take_line(line, may_take), Take::Broken(_)),
                    "{}",
                    String::from_utf8_lossy(line)
                );
            }
        }
        let fine = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert_eq!(answers.take_line(fine, false), Take::Left);
        let pair = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\ud83d\ude00 \\ud800"}]}}"#;
        assert_eq!(answers.take_line(pair, false), Take::Left);
        assert!(answers.forget(&id(1)));
        assert!(!answers.forget(&id(1)));
    }

    #[test]
    fn an_id_answered_another_way_or_forgotten_takes_no_fast_path() {
        let answers = CallAnswers::default();
        let answer = |n: i64| format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"content":[]}}}}"#);
        answers.sent(id(1));
        answers.forget(&id(1));
        assert!(!take(&answers, &answer(1)));
        for n in 0..=REMEMBERED_IDS as i64 + 10 {
            answers.sent(id(100 + n));
        }
        assert!(!take(&answers, &answer(100)), "the oldest is forgotten");
        assert!(take(&answers, &answer(100 + REMEMBERED_IDS as i64)));
        assert!(answers.in_flight() <= REMEMBERED_IDS);
    }
}
