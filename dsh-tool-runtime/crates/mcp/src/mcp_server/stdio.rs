//! The stdio transport of `serve`: the process's stdin and stdout, read and written without a
//! thread hop when both are pipes.
//!
//! tokio's `stdin()`/`stdout()` (what `rmcp::transport::stdio` uses) hand every read and write
//! to the blocking thread pool, because a terminal or a regular file cannot be polled. An MCP
//! client that spawns the server usually connects pipes, and a pipe can be registered with the
//! reactor: a round trip then saves a thread hand-off in each direction.
//!
//! Polling needs `O_NONBLOCK`, a flag of the open file description, which every process holding
//! the same end shares (a shell pipeline's next command, a parent that kept its copy): setting it
//! on descriptor 0 or 1 would make their reads and writes fail with `EAGAIN`. So each pipe is
//! opened again through `/proc/self/fd/N`, which gives this process a description of its own for
//! the same pipe. Anything else (a terminal, a file, a socket, no `/proc`) keeps tokio's blocking
//! stdio for both directions, and nothing shared is changed.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ClientRequest, GetMeta, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::ErrorData;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::telemetry::Acknowledgements;

/// The read half of the transport.
pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of the transport.
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The longest request line read: 64 MiB, as the MCP client side reads (rmcp's default is
/// 16 MiB). A longer line is dropped by rmcp with an error in the log.
pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;

/// How long end of input is held back at most for the `subscriptions/listen` streams still
/// open to be answered. They end as soon as `ended` is cancelled, so this only bounds a stream
/// that does not (rmcp's own drain then waits up to 5 s more).
const END_HOLD: Duration = Duration::from_secs(5);

/// The parse errors (`-32700`, one per input line that is not JSON) waiting to be written at
/// most: a client that sends garbage and never reads its answers cannot make the server hold
/// more; further ones are dropped, as rmcp drops such lines.
const MAX_PARSE_ERRORS_QUEUED: usize = 16;

/// stdin and stdout as the server's transport: both polled when both are pipes, else both
/// through tokio's blocking stdio. See [`Stdio`] for what happens at end of input.
pub(crate) fn transport(ended: CancellationToken) -> Stdio {
    let (input, output): (Input, Output) =
        match polled(Path::new("/proc/self/fd/0"), Path::new("/proc/self/fd/1")) {
            Ok((input, output)) => (Box::new(input), Box::new(output)),
            Err(_) => {
                let (input, output) = rmcp::transport::stdio();
                (Box::new(input), Box::new(output))
            }
        };
    let (unparsable, refused) = mpsc::channel(MAX_PARSE_ERRORS_QUEUED);
    let input: Input = Box::new(Checked::new(input, unparsable));
    Stdio {
        inner: AsyncRwTransport::new_server(input, output).with_max_line_length(MAX_REQUEST_BYTES),
        refused,
        answering: Arc::new(Semaphore::new(MAX_PARSE_ERRORS_QUEUED)),
        ended,
        listening: watch::Sender::new(HashSet::new()),
        held_until: None,
        acknowledgements: Acknowledgements::default(),
    }
}

/// The stdio transport, which ends the open `subscriptions/listen` streams when stdin ends.
///
/// A listen stream ends only when told to, and rmcp stops its loop at end of input: a stream
/// still being acknowledged then waits for a loop that no longer runs, and rmcp drops its
/// answer after waiting 5 s. So at end of input this transport cancels `ended` (the handler's
/// streams, those for list changes and those for nothing, stop on it) and reports the end to
/// rmcp only once every listen request it read has been answered (or cancelled by the client),
/// at most [`END_HOLD`] later.
pub(crate) struct Stdio {
    inner: AsyncRwTransport<RoleServer, Input, Output>,
    /// One message per input line that is not JSON, which [`Checked`] kept from rmcp.
    refused: mpsc::Receiver<()>,
    /// A permit per parse error being written: a client that sends garbage and reads nothing
    /// holds at most [`MAX_PARSE_ERRORS_QUEUED`] answers in memory; the rest are dropped.
    answering: Arc<Semaphore>,
    ended: CancellationToken,
    /// The ids of the `subscriptions/listen` requests read and not answered yet.
    listening: watch::Sender<HashSet<RequestId>>,
    /// Set once end of input was read: until when it is held back.
    held_until: Option<tokio::time::Instant>,
    /// The listen requests whose acknowledgement (which rmcp sends) gets its span here.
    acknowledgements: Acknowledgements,
}

impl Stdio {
    /// Keeps track of the listen requests among the messages read.
    fn note(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        match message {
            // Every stream the handler opens ends on `ended`.
            JsonRpcMessage::Request(request)
                if matches!(
                    request.request,
                    ClientRequest::SubscriptionsListenRequest(_)
                ) =>
            {
                let meta = request.request.get_meta();
                self.acknowledgements.listening(
                    &request.id,
                    &meta.0,
                    meta.protocol_version().map(|version| version.to_string()),
                );
                let id = request.id.clone();
                self.listening.send_modify(|open| {
                    open.insert(id);
                });
            }
            // rmcp drops the answer of a request the client cancelled.
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.acknowledgements.ended(id);
                    self.listening.send_if_modified(|open| open.remove(id));
                }
            }
            _ => {}
        }
    }
}

impl Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.acknowledgements.ended(id);
            self.listening.send_if_modified(|open| open.remove(id));
        }
        // rmcp's acknowledgement of a listen stream: its span lasts until it is written.
        let span = match &mut item {
            JsonRpcMessage::Notification(notification) => self
                .acknowledgements
                .acknowledging(&mut notification.notification),
            _ => None,
        };
        self.inner
            .send(item)
            .instrument(span.unwrap_or_else(Span::none))
    }

    /// Cancel-safe, as rmcp needs: the end of input, once read, is kept in `held_until`.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let held_until = match self.held_until {
            Some(held_until) => held_until,
            None => loop {
                tokio::select! {
                    biased;
                    Some(()) = self.refused.recv() => {
                        if let Ok(permit) = Arc::clone(&self.answering).try_acquire_owned() {
                            // Spawned: an answer half sent when rmcp drops this future is not
                            // lost.
                            let answer = self.inner.send(parse_error());
                            tokio::spawn(async move {
                                let _ = answer.await;
                                drop(permit);
                            });
                        }
                    }
                    message = self.inner.receive() => match message {
                        Some(message) => {
                            self.note(&message);
                            return Some(message);
                        }
                        None => {
                            self.ended.cancel();
                            break *self
                                .held_until
                                .insert(tokio::time::Instant::now() + END_HOLD);
                        }
                    },
                }
            },
        };
        let mut listening = self.listening.subscribe();
        // Past the bound, the end is reported with streams still open: rmcp's drain follows.
        let _ = tokio::time::timeout_at(held_until, listening.wait_for(HashSet::is_empty)).await;
        None
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

/// The JSON-RPC 2.0 answer to a line that is not JSON: `-32700 Parse error` with a `null` id,
/// as no request id can be read from it.
fn parse_error() -> TxJsonRpcMessage<RoleServer> {
    TxJsonRpcMessage::<RoleServer>::error(
        ErrorData::parse_error("Parse error: the line is not JSON", None),
        None,
    )
}

/// The input with every line that is not JSON taken out and reported on `unparsable`, so that
/// it is answered `-32700` (JSON-RPC 2.0 §5.1) where rmcp would drop it without a word. Lines
/// that are JSON, empty, or longer than [`MAX_REQUEST_BYTES`] (which rmcp refuses itself) pass
/// as they are; an unterminated last line passes at the end of input.
pub(crate) struct Checked {
    inner: Input,
    /// The current line, up to its newline.
    line: Vec<u8>,
    /// Checked bytes not yet handed on, from `handed`.
    ready: Vec<u8>,
    handed: usize,
    /// The current line is past the limit: passed on unchecked up to its newline.
    passing: bool,
    /// The input ended.
    ended: bool,
    unparsable: mpsc::Sender<()>,
}

impl Checked {
    fn new(inner: Input, unparsable: mpsc::Sender<()>) -> Checked {
        Checked {
            inner,
            line: Vec::new(),
            ready: Vec::new(),
            handed: 0,
            passing: false,
            ended: false,
            unparsable,
        }
    }

    /// Takes `bytes` read from the input.
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let end = bytes.iter().position(|&byte| byte == b'\n');
            let (part, rest) = match end {
                Some(end) => bytes.split_at(end + 1),
                None => (bytes, &[][..]),
            };
            bytes = rest;
            if self.passing {
                self.ready.extend_from_slice(part);
                self.passing = end.is_none();
                continue;
            }
            self.line.extend_from_slice(part);
            if end.is_some() {
                let line = std::mem::take(&mut self.line);
                if is_json_or_blank(&line) {
                    self.ready.extend_from_slice(&line);
                } else {
                    // Full: the client reads none of the answers queued; this one is dropped.
                    let _ = self.unparsable.try_send(());
                }
                self.line = line;
                self.line.clear();
            } else if self.line.len() > MAX_REQUEST_BYTES {
                self.ready.append(&mut self.line);
                self.passing = true;
            }
        }
    }
}

/// Whether `line` (with its newline) is JSON, or blank (which rmcp skips).
fn is_json_or_blank(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // RFC 8259 §8.1 lets a parser skip a byte order mark, as rmcp does.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.iter().all(u8::is_ascii_whitespace)
        || serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
}

impl AsyncRead for Checked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.handed < this.ready.len() {
                let count = buf.remaining().min(this.ready.len() - this.handed);
                buf.put_slice(&this.ready[this.handed..this.handed + count]);
                this.handed += count;
                if this.handed == this.ready.len() {
                    this.ready.clear();
                    this.handed = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut scratch = [0u8; 8192];
            let mut read = ReadBuf::new(&mut scratch);
            std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                this.ended = true;
                this.ready.append(&mut this.line);
            } else {
                this.take(read.filled());
            }
        }
    }
}

/// Opens the pipes behind `input` and `output` (paths of `/proc/self/fd`) as new non-blocking
/// descriptions. Fails, changing nothing, when either is not a pipe or cannot be opened (a pipe
/// without a reader cannot be opened for writing without blocking).
fn polled(input: &Path, output: &Path) -> std::io::Result<(pipe::Receiver, pipe::Sender)> {
    let options = pipe::OpenOptions::new();
    let receiver = options.open_receiver(input)?;
    let sender = options.open_sender(output)?;
    Ok((receiver, sender))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn nonblocking(fd: &impl AsRawFd) -> bool {
        // SAFETY: F_GETFL reads the flags of a descriptor this test owns.
        #[allow(unsafe_code)]
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    }

    #[tokio::test]
    async fn pipes_are_polled_through_descriptions_of_their_own() {
        let (theirs_in, mut ours_in) = std::io::pipe().unwrap();
        let (mut ours_out, theirs_out) = std::io::pipe().unwrap();
        let path = |fd: &dyn AsRawFd| format!("/proc/self/fd/{}", fd.as_raw_fd());
        let (mut input, mut output) =
            polled(Path::new(&path(&theirs_in)), Path::new(&path(&theirs_out))).unwrap();
        std::io::Write::write_all(&mut ours_in, b"{}\n").unwrap();
        let mut line = [0u8; 3];
        input.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"{}\n");
        output.write_all(b"[]\n").await.unwrap();
        std::io::Read::read_exact(&mut ours_out, &mut line).unwrap();
        assert_eq!(&line, b"[]\n");
        // The descriptors given to us keep blocking: others holding them are not disturbed.
        assert!(!nonblocking(&theirs_in));
        assert!(!nonblocking(&theirs_out));
    }

    /// Lines that are not JSON are taken out and reported, one report each; JSON, blank and
    /// unterminated lines pass, split across reads however they come.
    #[tokio::test]
    async fn lines_that_are_not_json_are_taken_out_and_reported() {
        let text = "{\"a\":1}\r\nnot json\n\n[1,\n\u{feff}{}\n{\"b\":2}\n{\"c\"";
        let (writer, reader) = tokio::io::duplex(3);
        let (unparsable, mut reported) = mpsc::channel(MAX_PARSE_ERRORS_QUEUED);
        let mut checked = Checked::new(Box::new(reader), unparsable);
        let writing = tokio::spawn(async move {
            let mut writer = writer;
            writer.write_all(text.as_bytes()).await.unwrap();
        });
        let mut passed = String::new();
        checked.read_to_string(&mut passed).await.unwrap();
        writing.await.unwrap();
        assert_eq!(passed, "{\"a\":1}\r\n\n\u{feff}{}\n{\"b\":2}\n{\"c\"");
        let mut reports = 0;
        while reported.try_recv().is_ok() {
            reports += 1;
        }
        assert_eq!(reports, 2);
    }

    /// A client that sends lines of garbage and reads none of the answers makes the server queue
    /// at most [`MAX_PARSE_ERRORS_QUEUED`] of them; the lines still never reach rmcp.
    #[tokio::test]
    async fn the_parse_errors_queued_are_bounded() {
        let text = "garbage\n".repeat(1000);
        let (unparsable, mut reported) = mpsc::channel(MAX_PARSE_ERRORS_QUEUED);
        let mut checked = Checked::new(Box::new(std::io::Cursor::new(text)), unparsable);
        let mut passed = String::new();
        checked.read_to_string(&mut passed).await.unwrap();
        assert_eq!(passed, "");
        let mut reports = 0;
        while reported.try_recv().is_ok() {
            reports += 1;
        }
        assert_eq!(reports, MAX_PARSE_ERRORS_QUEUED);
    }

    #[tokio::test]
    async fn a_file_is_not_polled() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let (_read, write) = std::io::pipe().unwrap();
        let write = format!("/proc/self/fd/{}", write.as_raw_fd());
        assert!(polled(file.path(), Path::new(&write)).is_err());
        assert!(polled(Path::new(&write), file.path()).is_err());
    }

    /// Names the runtime's spans opened while it is the thread's subscriber, with their
    /// `network.transport`.
    #[derive(Clone, Default)]
    struct Named(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

    struct Fields<'a>(&'a mut (String, String));

    impl tracing::field::Visit for Fields<'_> {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            match field.name() {
                "otel.name" => self.0.0 = value.to_owned(),
                "network.transport" => self.0.1 = value.to_owned(),
                _ => {}
            }
        }
        fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Named {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let mut named = (String::new(), String::new());
            attrs.record(&mut Fields(&mut named));
            // The runtime's spans: rmcp's have no `otel.name`.
            if !named.0.is_empty() {
                self.0.lock().unwrap().push(named);
            }
        }
    }

    /// rmcp acknowledges a listen stream itself; the stdio transport, which writes it, gives it
    /// its `CLIENT` span.
    #[tokio::test]
    async fn the_acknowledgement_of_a_listen_stream_is_a_span() {
        use rmcp::model::ServerNotification;
        use tracing_subscriber::layer::SubscriberExt;

        let named = Named::default();
        let _guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(named.clone()));
        let (mut client, server) = tokio::io::duplex(4096);
        let (input, output) = tokio::io::split(server);
        let (_unparsable, refused) = mpsc::channel(MAX_PARSE_ERRORS_QUEUED);
        let mut stdio = Stdio {
            inner: AsyncRwTransport::new_server(
                Box::new(input) as Input,
                Box::new(output) as Output,
            ),
            refused,
            answering: Arc::new(Semaphore::new(MAX_PARSE_ERRORS_QUEUED)),
            ended: CancellationToken::new(),
            listening: watch::Sender::new(HashSet::new()),
            held_until: None,
            acknowledgements: Acknowledgements::default(),
        };
        client
            .write_all(
                br#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            )
            .await
            .unwrap();
        client.write_all(b"\n").await.unwrap();
        assert!(stdio.receive().await.is_some());
        let acknowledgement: ServerNotification = serde_json::from_value(serde_json::json!({
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 3}}}))
        .unwrap();
        stdio
            .send(JsonRpcMessage::notification(acknowledgement))
            .await
            .unwrap();
        let mut line = Vec::new();
        while !line.ends_with(b"\n") {
            line.push(client.read_u8().await.unwrap());
        }
        let written: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            written["method"],
            "notifications/subscriptions/acknowledged"
        );
        assert_eq!(
            *named.0.lock().unwrap(),
            [(
                "notifications/subscriptions/acknowledged".to_owned(),
                "pipe".to_owned()
            )]
        );
    }
}
