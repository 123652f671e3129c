//! `tools/call` answers read straight as `CallToolResult` on the stdio transport.
//!
//! rmcp parses every incoming line through its untagged message and result enums: it buffers
//! the line and tries the message kinds and then the result types in turn (`CallToolResult` is
//! the sixteenth), building and dropping a `serde_json` error for each miss — about a third of
//! the host's work per call. The bridge knows which request ids it sent as `tools/call`
//! ([`CallAnswers::sent`], from the transport's `send`); the stdio reader parses a line answering
//! one of them as exactly `{jsonrpc, id, result}` with a `CallToolResult` result and keeps the
//! typed message here instead of passing the line on, and the transport's `receive` hands it to
//! rmcp ([`ProgressTap`](super::progress::ProgressTap)). Only a line read when every earlier
//! line has reached rmcp is taken, and the reader passes nothing on while an answer waits, so the
//! answers keep their place among the server's messages. Anything else (another field, a result
//! that is no `CallToolResult`, an id not sent as `tools/call`) goes to rmcp unchanged, so what
//! rmcp would refuse it still refuses.

use std::collections::{HashSet, VecDeque};

use parking_lot::Mutex;
use rmcp::model::{
    CallToolResult, JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use serde::Deserialize;

/// `tools/call` ids remembered at most; an older one forgotten only loses the fast path.
const REMEMBERED_IDS: usize = 4096;

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

    /// Forgets `id` (its answer was read another way).
    pub(crate) fn answered(&self, id: &RequestId) {
        self.state.lock().ids.remove(id);
    }

    /// Takes `line` (one JSON text) when it answers a `tools/call` in flight; `false` leaves it
    /// to rmcp.
    pub(crate) fn take_line(&self, line: &[u8]) -> bool {
        if self.state.lock().ids.is_empty() {
            return false;
        }
        let Ok(answer) = serde_json::from_slice::<CallAnswer>(line) else {
            return false;
        };
        let mut state = self.state.lock();
        if !state.ids.remove(&answer.id) {
            return false;
        }
        state.parsed += 1;
        state
            .answers
            .push_back(ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: answer.jsonrpc,
                id: answer.id,
                result: ServerResult::CallToolResult(answer.result),
            }));
        true
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
        answers.take_line(line.as_bytes())
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
            // Another protocol version.
            r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#,
            // A notification.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            "not json",
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

    #[test]
    fn an_id_answered_another_way_or_forgotten_takes_no_fast_path() {
        let answers = CallAnswers::default();
        let answer = |n: i64| format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"content":[]}}}}"#);
        answers.sent(id(1));
        answers.answered(&id(1));
        assert!(!take(&answers, &answer(1)));
        for n in 0..=REMEMBERED_IDS as i64 + 10 {
            answers.sent(id(100 + n));
        }
        assert!(!take(&answers, &answer(100)), "the oldest is forgotten");
        assert!(take(&answers, &answer(100 + REMEMBERED_IDS as i64)));
        assert!(answers.in_flight() <= REMEMBERED_IDS);
    }
}
