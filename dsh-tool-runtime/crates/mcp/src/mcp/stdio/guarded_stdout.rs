//! The child's stdout as rmcp reads it: whole lines, each checked for its length and depth, and
//! the answers to `tools/call` taken parsed ([`CallAnswers`]), inside rmcp's own reads.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rmcp::model::RequestId;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::ChildStdout;

use super::relay_depth::{MAX_RELAY_DEPTH, cut_deep};
use super::top_level_id::TopLevelId;
use crate::json::text_depth;
use crate::mcp::answers::{CallAnswers, Take};
use crate::mcp::config::MAX_LINE_BYTES;

/// The child's stdout as rmcp reads it: whole lines, each passed on as it is unless it nests
/// deeper than [`MAX_RELAY_DEPTH`] (then rewritten by [`cut_deep`], or refused when it answers a
/// call) or is longer than its limit (by default [`MAX_LINE_BYTES`]; then dropped, and the request it answers gets an error in its place). It
/// runs inside rmcp's own reads: no task and no second pipe between the child and the codec.
pub(crate) struct GuardedStdout<R = ChildStdout> {
    inner: R,
    /// The longest line passed on, newline included.
    max_line: usize,
    /// The longest `tools/list` answer passed on, newline included: a longer one is refused
    /// before rmcp parses it (a parsed page costs some 30 times its text).
    max_list_line: usize,
    /// The line being read, without its newline yet.
    line: Vec<u8>,
    /// Discarding the rest of an oversized line, looking for the request id it answers.
    skipping: Option<(TopLevelId, usize)>,
    /// Checked lines waiting to be read, from `offset` on.
    ready: Vec<u8>,
    offset: usize,
    eof: bool,
    /// What one read from the child lands in. Kept (zeroed once) rather than a fresh zeroed
    /// array per read: zeroing 16 KiB on every poll, `Pending` ones included, was most of the
    /// work the bridge added to a call.
    chunk: Box<[u8]>,
    /// Where `tools/call` answers go parsed instead of as text ([`CallAnswers`]).
    answers: Option<Arc<CallAnswers>>,
}

/// The size of one read from the child.
const CHUNK_BYTES: usize = 16 * 1024;

impl<R> GuardedStdout<R> {
    pub(super) fn new(inner: R) -> Self {
        GuardedStdout {
            inner,
            max_line: MAX_LINE_BYTES,
            max_list_line: MAX_LINE_BYTES,
            line: Vec::new(),
            skipping: None,
            ready: Vec::new(),
            offset: 0,
            eof: false,
            chunk: vec![0; CHUNK_BYTES].into_boxed_slice(),
            answers: None,
        }
    }

    pub(super) fn with_answers(mut self, answers: Arc<CallAnswers>) -> Self {
        self.answers = Some(answers);
        self
    }

    pub(super) fn with_max_line(mut self, bytes: usize) -> Self {
        self.max_line = bytes;
        self
    }

    pub(super) fn with_max_list_line(mut self, bytes: usize) -> Self {
        self.max_list_line = bytes;
        self
    }

    /// Takes in one chunk read from the child, moving each completed line to `ready`.
    fn take_in(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (part, rest, complete) = match chunk.iter().position(|&byte| byte == b'\n') {
                Some(end) => (&chunk[..=end], &chunk[end + 1..], true),
                None => (chunk, &[][..], false),
            };
            chunk = rest;
            if let Some((id, length)) = &mut self.skipping {
                id.feed(part);
                *length += part.len();
                if complete {
                    self.drop_long_line();
                }
                continue;
            }
            self.line.extend_from_slice(part);
            if self.line.len() > self.max_line {
                let mut id = TopLevelId::default();
                id.feed(&self.line);
                self.skipping = Some((id, self.line.len()));
                self.line = Vec::new();
                if complete {
                    self.drop_long_line();
                }
                continue;
            }
            if complete {
                self.finish_line();
            }
        }
    }

    /// Ends an oversized line: an answer to a request becomes an error answer for that request
    /// (rmcp would drop the line, and the call wait for its timeout); anything else is dropped.
    fn drop_long_line(&mut self) {
        let Some((id, length)) = self.skipping.take() else {
            return;
        };
        tracing::warn!(target: "dsh_tool_mcp::mcp", "dropping a server line of {length} bytes (at most {} are read)", self.max_line);
        if let Some(id) = id.value() {
            // No answer for it reaches the call-answer reader: the request stops being in
            // flight here.
            if let (Some(answers), Ok(request)) = (
                &self.answers,
                serde_json::from_value::<RequestId>(id.clone()),
            ) {
                answers.forget(&request);
            }
            let message = format!(
                "the server's answer is {length} bytes long; at most {} bytes are read",
                self.max_line
            );
            self.push_error(id, -32603, &message);
        }
    }

    /// Queues a JSON-RPC error answer for request `id` in place of a line rmcp cannot use.
    fn push_error(&mut self, id: Value, code: i32, message: &str) {
        let error = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": code,
            "message": message,
        }});
        self.ready.extend_from_slice(error.to_string().as_bytes());
        self.ready.push(b'\n');
    }

    /// Fails the `tools/call` in flight that the line being finished answers, with an error
    /// answer saying `message`; `false` (nothing queued) when the line answers no such call.
    fn fail_call(&mut self, code: i32, message: &str) -> bool {
        let mut id = TopLevelId::default();
        id.feed(&self.line);
        let call = id.value().filter(|id| {
            let answers = self.answers.as_ref();
            serde_json::from_value::<RequestId>(id.clone())
                .is_ok_and(|id| answers.is_some_and(|answers| answers.forget(&id)))
        });
        match call {
            Some(id) => {
                self.push_error(id, code, message);
                true
            }
            None => false,
        }
    }

    /// Refuses the line being finished when it answers a `tools/list`: an error answer for
    /// that request takes its place. `false` when it answers no list.
    fn refuse_long_list(&mut self) -> bool {
        let mut id = TopLevelId::default();
        id.feed(&self.line);
        let Some(id) = id.value().filter(|id| {
            serde_json::from_value::<RequestId>(id.clone()).is_ok_and(|id| {
                self.answers
                    .as_ref()
                    .is_some_and(|answers| answers.is_list(&id))
            })
        }) else {
            return false;
        };
        let message = format!(
            "the server's tools/list answer is {} bytes long; at most {} bytes are read",
            self.line.len() - 1,
            self.max_list_line
        );
        tracing::warn!(target: "dsh_tool_mcp::mcp", "{message}");
        self.push_error(id, -32603, &message);
        true
    }

    fn finish_line(&mut self) {
        if self.line.last() != Some(&b'\n') {
            self.line.push(b'\n');
        }
        if self.line.len() > self.max_list_line && self.refuse_long_list() {
            self.line.clear();
            return;
        }
        if text_depth(&self.line) > MAX_RELAY_DEPTH {
            let message =
                format!("the server's answer is nested deeper than {MAX_RELAY_DEPTH} levels");
            if self.fail_call(-32603, &message) {
                tracing::warn!(target: "dsh_tool_mcp::mcp", "{message}");
            } else {
                let cut = cut_deep(&self.line);
                self.ready.extend_from_slice(&cut);
            }
            self.line.clear();
            return;
        }
        // Taken only when every earlier line has reached rmcp: rmcp's buffer is empty whenever
        // it reads from here, so nothing written before the answer is left behind.
        let take = match &self.answers {
            Some(answers) => answers.take_line(&self.line, self.ready.is_empty()),
            None => Take::Left,
        };
        match take {
            Take::Taken => {}
            Take::Left => self.ready.extend_from_slice(&self.line),
            // rmcp would drop a line that is no JSON, and the call wait for its timeout: the
            // call it answers fails at once instead, saying why.
            Take::Broken(reason) => {
                let message = format!("the server's answer is not valid JSON: {reason}");
                if self.fail_call(-32700, &message) {
                    tracing::warn!(target: "dsh_tool_mcp::mcp", "a server answer is no JSON: {reason}");
                } else {
                    self.ready.extend_from_slice(&self.line);
                }
            }
        }
        self.line.clear();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for GuardedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            // While a taken answer waits, nothing after it goes on. No wake-up is needed:
            // `ProgressTap::receive` takes the answer as soon as this read returns.
            if this
                .answers
                .as_ref()
                .is_some_and(|answers| answers.waiting())
            {
                return Poll::Pending;
            }
            if this.offset < this.ready.len() {
                let n = out.remaining().min(this.ready.len() - this.offset);
                out.put_slice(&this.ready[this.offset..this.offset + n]);
                this.offset += n;
                if this.offset == this.ready.len() {
                    this.ready.clear();
                    this.offset = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = std::mem::take(&mut this.chunk);
            let mut buf = ReadBuf::new(&mut chunk);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut buf);
            let read = buf.filled().len();
            this.chunk = chunk;
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) => {}
            }
            if read == 0 {
                // EOF: a last line without its newline still counts.
                this.eof = true;
                if this.skipping.is_some() {
                    this.drop_long_line();
                } else if !this.line.is_empty() {
                    this.finish_line();
                }
            } else {
                let chunk = std::mem::take(&mut this.chunk);
                this.take_in(&chunk[..read]);
                this.chunk = chunk;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::RoleClient;
    use rmcp::transport::async_rw::AsyncRwTransport;
    use serde_json::json;

    use super::*;
    use crate::mcp::progress::ProgressTap;
    use crate::mcp::stdio::relay_depth::TOO_DEEP;

    type Tap =
        ProgressTap<AsyncRwTransport<RoleClient, GuardedStdout<Pieces>, tokio::io::DuplexStream>>;

    /// The stdio transport as the bridge builds it, reading `pieces` (one per read); the other
    /// end of its writer comes back too.
    fn tap_over(
        pieces: Vec<Vec<u8>>,
        answers: &Arc<CallAnswers>,
    ) -> (Tap, tokio::io::DuplexStream) {
        let (sink, writer) = tokio::io::duplex(1 << 16);
        let tap = ProgressTap {
            inner: AsyncRwTransport::new_client(
                GuardedStdout::new(tokio_test_reader(pieces)).with_answers(answers.clone()),
                writer,
            ),
            link: std::sync::Weak::new(),
            answers: Some(answers.clone()),
            spans: crate::telemetry::ClientSpans::new(
                crate::telemetry::ClientPeer::stdio("test"),
                None,
            ),
        };
        (tap, sink)
    }

    /// `tools/call` answers parsed by the reader reach rmcp typed as rmcp itself would read them,
    /// in the order the server wrote every line, parsed or not, whether the lines arrive one by
    /// one (every call's answer is parsed here) or in one piece (only the first: the others come
    /// after lines rmcp has not read yet); lines that answer no call in flight are left to rmcp.
    #[tokio::test]
    async fn parsed_answers_keep_the_order_the_server_wrote() {
        use rmcp::model::{NumberOrString, ServerJsonRpcMessage};
        use rmcp::transport::Transport;

        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"one"}]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"not a call"}]}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"n":3}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown tool"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":{"isError":true,"content":[{"type":"text","text":"six"}]}}"#,
        ];
        // rmcp's messages have no `PartialEq`: compared as what they write.
        let written = |messages: &[ServerJsonRpcMessage]| -> Vec<Value> {
            messages
                .iter()
                .map(|message| serde_json::to_value(message).unwrap())
                .collect()
        };
        let expected: Vec<ServerJsonRpcMessage> = lines
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let one_by_one: Vec<Vec<u8>> = lines
            .iter()
            .map(|l| format!("{l}\n").into_bytes())
            .collect();
        let one_piece = vec![format!("{}\n", lines.join("\n")).into_bytes()];
        for (pieces, parsed) in [(one_by_one, 3), (one_piece, 1)] {
            let answers = Arc::new(CallAnswers::default());
            for id in [1, 3, 4, 6] {
                answers.sent(NumberOrString::Number(id));
            }
            let (mut tap, _sink) = tap_over(pieces, &answers);
            let mut seen = Vec::new();
            while let Some(message) = tap.receive().await {
                seen.push(message);
            }
            assert_eq!(written(&seen), written(&expected));
            assert_eq!(answers.parsed_so_far(), parsed);
            assert_eq!(answers.in_flight(), 0);
        }
    }

    /// An answer to a call in flight that is no JSON (rmcp would drop it, and the call wait for
    /// its timeout) reaches rmcp as an error answer for that call; other lines pass unchanged.
    #[tokio::test]
    async fn a_broken_answer_fails_its_call_at_once() {
        use rmcp::model::{NumberOrString, ServerJsonRpcMessage};
        use rmcp::transport::Transport;

        let answers = Arc::new(CallAnswers::default());
        answers.sent(NumberOrString::Number(1));
        let pieces = vec![
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}}\n".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n".to_vec(),
        ];
        let (mut tap, _sink) = tap_over(pieces, &answers);
        match tap.receive().await {
            Some(ServerJsonRpcMessage::Error(error)) => {
                assert_eq!(error.id, Some(NumberOrString::Number(1)));
                assert_eq!(error.error.code.0, -32700);
                assert!(error.error.message.contains("not valid JSON"), "{error:?}");
            }
            other => panic!("an error answer for call 1, not {other:?}"),
        }
        assert!(matches!(
            tap.receive().await,
            Some(ServerJsonRpcMessage::Response(response)) if response.id == NumberOrString::Number(2)
        ));
        assert!(tap.receive().await.is_none());
        assert_eq!(answers.in_flight(), 0);
    }

    /// Reads everything through a reader that hands out `chunk`-byte pieces.
    fn read_through(input: &[u8], chunk: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let pieces: Vec<Vec<u8>> = input.chunks(chunk).map(<[u8]>::to_vec).collect();
        let mut builder = tokio_test_reader(pieces);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut out = Vec::new();
            GuardedStdout::new(&mut builder)
                .read_to_end(&mut out)
                .await
                .unwrap();
            out
        })
    }

    /// A reader returning one piece per read, like a pipe delivering partial lines.
    fn tokio_test_reader(pieces: Vec<Vec<u8>>) -> Pieces {
        Pieces(pieces.into_iter().collect())
    }

    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            out: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if let Some(piece) = self.0.pop_front() {
                out.put_slice(&piece);
            }
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn lines_pass_whole_and_unchanged_across_partial_reads() {
        let input = b"{\"a\":1}\n{\"b\":[2,3]}\n{\"c\":\"no newline\"}";
        for chunk in [1, 3, 7, 64] {
            assert_eq!(
                read_through(input, chunk),
                b"{\"a\":1}\n{\"b\":[2,3]}\n{\"c\":\"no newline\"}\n".to_vec(),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_oversized_answer_becomes_an_error_for_its_request() {
        use tokio::io::AsyncReadExt;
        let long = format!(
            "{{\"result\":{{\"text\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":42}}\n",
            "x".repeat(5_000)
        );
        let notification = format!(
            "{{\"method\":\"m\",\"params\":\"{}\"}}\n",
            "y".repeat(5_000)
        );
        let input = format!("{{\"a\":1}}\n{long}{notification}{{\"b\":2}}\n");
        let pieces: Vec<Vec<u8>> = input.as_bytes().chunks(300).map(<[u8]>::to_vec).collect();
        let mut source = tokio_test_reader(pieces);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = runtime.block_on(async {
            let mut guarded = GuardedStdout::new(&mut source);
            guarded.max_line = 1_000;
            let mut out = Vec::new();
            guarded.read_to_end(&mut out).await.unwrap();
            out
        });
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], json!({"a": 1}));
        assert_eq!(lines[1]["id"], 42);
        assert_eq!(lines[1]["error"]["code"], -32603);
        assert!(
            lines[1]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("at most 1000 bytes"),
            "{lines:?}"
        );
        assert_eq!(lines[2], json!({"b": 2}));
    }

    #[test]
    fn a_deep_line_is_rewritten_and_its_neighbours_kept() {
        let deep = format!("{{\"x\":{}1{}}}\n", "[".repeat(500), "]".repeat(500));
        let input = format!("{{\"before\":1}}\n{deep}{{\"after\":2}}\n");
        let out = String::from_utf8(read_through(input.as_bytes(), 100)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], "{\"before\":1}");
        assert!(text_depth(lines[1].as_bytes()) < MAX_RELAY_DEPTH);
        assert!(lines[1].contains(TOO_DEEP));
        assert_eq!(lines[2], "{\"after\":2}");
    }
}
