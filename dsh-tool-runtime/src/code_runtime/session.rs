//! The run session every code runtime shares: how a run ends ([`Ending`]) and becomes a
//! [`RunOutcome`], the texts of the host's own failures, and the binding calls of one run
//! ([`Calls`]: id de-duplication, the call limit, admission, dispatch, replies).
//!
//! Each transport — the pipes to a child process (`subprocess/`), the shared-memory ring to a
//! pooled worker (`worker_pool/`), the interpreter thread in the host (`embedded/driver.rs`) —
//! moves frames and watches its own process or thread, and asks this module what a call, a log
//! or an ending means. So a program meets the same messages and failure kinds on every runtime.
//!
//! What stays a property of one transport: only a child process has output of its own outside the
//! frames (its stdout and stderr, split into log entries by [`Lines`], each cut at the frame
//! limit); a pooled worker's own output is the worker's, and an interpreter thread has none. A call
//! to a binding the run does not have can come only from a program that reaches the raw call
//! entry (Monty's `_dsh_call`, a frame forged on a child's protocol pipe): the bindings the
//! bootstraps build name only the run's own.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::task::{Context, Poll, Waker};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::frame::{self, ALLOWANCE_FLOOR, ALLOWANCE_PER_BYTE, ChildFrame, Completion, MAX_DEPTH};
use super::ledger::{OutputLedger, failure_outcome};
use super::sandbox::SandboxStatus;
use super::value_text::{JsonText, Unfit};
use super::{
    BindingCall, BindingDispatch, BindingError, CodeRunFailure, FailureKind, RunOutcome, RunRequest,
};
use crate::durable::Journal;
use crate::durable::replay::Admit;

/// How a run ended, before the output ledger has had its say.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The program returned this value, as compact JSON text (`None`: nothing).
    Done(Option<JsonText>),
    /// A typed failure: the program's own (`exception`, `invalid-output`) or the host's.
    Fail(FailureKind, String),
    /// The output cap was exceeded; the diagnostic (already cut to fit).
    Overflow(String),
}

impl From<Completion> for Ending {
    fn from(completion: Completion) -> Self {
        match completion {
            Completion::Value(value) => Ending::Done(value),
            Completion::Failure { kind, message } => Ending::Fail(kind, message),
        }
    }
}

impl Ending {
    /// `abort` `run aborted`: the request's signal was cancelled mid-run.
    pub(crate) fn aborted() -> Self {
        Ending::Fail(FailureKind::Abort, "run aborted".to_owned())
    }

    /// `abort` `runtime disposed`.
    pub(crate) fn disposed() -> Self {
        Ending::Fail(FailureKind::Abort, "runtime disposed".to_owned())
    }

    /// `timeout` `wall-clock ceiling reached (<ms>ms)`.
    pub(crate) fn wall(max_wall_ms: u64) -> Self {
        Ending::Fail(
            FailureKind::Timeout,
            format!("wall-clock ceiling reached ({max_wall_ms}ms)"),
        )
    }

    /// `timeout` `compute budget exhausted (<ms>ms of CPU time)`.
    pub(crate) fn compute(compute_ms: u64) -> Self {
        Ending::Fail(
            FailureKind::Timeout,
            format!("compute budget exhausted ({compute_ms}ms of CPU time)"),
        )
    }

    /// `memory-limit` `memory limit reached (<mb> MiB)`: the interpreter's allocator refused.
    #[cfg_attr(not(feature = "embedded-js"), allow(dead_code))]
    pub(crate) fn allocator_limit(max_memory_mb: u64) -> Self {
        Ending::Fail(
            FailureKind::MemoryLimit,
            format!("memory limit reached ({max_memory_mb} MiB)"),
        )
    }

    /// `binding-limit` `binding call limit reached (<n> calls)`.
    pub(crate) fn call_limit(max_binding_calls: u64) -> Self {
        Ending::Fail(
            FailureKind::BindingLimit,
            format!("binding call limit reached ({max_binding_calls} calls)"),
        )
    }

    /// `worker-exit` with `message`.
    pub(crate) fn worker_exit(message: impl Into<String>) -> Self {
        Ending::Fail(FailureKind::WorkerExit, message.into())
    }

    /// The outcome: a value that does not fit after the logs ends as `output-limit`, a failure's
    /// message goes through the ledger like any output, and `sandbox` is reported whatever the
    /// ending.
    pub(crate) fn into_outcome(
        self,
        ledger: &mut OutputLedger,
        mut logs: Vec<String>,
        sandbox: Option<SandboxStatus>,
    ) -> RunOutcome {
        let overflow = |logs, message| RunOutcome {
            value: None,
            logs,
            error: Some(CodeRunFailure {
                kind: FailureKind::OutputLimit,
                message,
            }),
            sandbox: None,
        };
        let outcome = match self {
            Ending::Done(Some(value)) if !ledger.fits_text(&value) => {
                let message = ledger.overflow_message(&mut logs);
                overflow(logs, message)
            }
            Ending::Done(value) => RunOutcome {
                value,
                logs,
                error: None,
                sandbox: None,
            },
            Ending::Fail(kind, message) => failure_outcome(ledger, logs, kind, message),
            Ending::Overflow(message) => overflow(logs, message),
        };
        RunOutcome { sandbox, ..outcome }
    }
}

/// The outcome of a run that ends before it has a process or an interpreter; its message still
/// has to fit the output cap (`max_output_bytes`).
pub(crate) fn early_outcome(
    max_output_bytes: u64,
    kind: FailureKind,
    message: String,
) -> RunOutcome {
    let mut ledger = OutputLedger::new(max_output_bytes);
    failure_outcome(&mut ledger, Vec::new(), kind, message)
}

/// The `run` frame that hands a process its program: the program, the binding namespaces as the
/// bootstraps read them, the output cap (`maxOutputBytes`) and the transport's own keys `extra`.
pub(crate) fn run_frame(
    program: &str,
    request: &RunRequest,
    cap: u64,
    extra: serde_json::Map<String, Value>,
) -> Vec<u8> {
    let namespaces: Vec<Value> = request
        .bindings
        .iter()
        .map(super::BindingNamespace::bootstrap_form)
        .collect();
    let mut frame = serde_json::Map::new();
    frame.insert("type".to_owned(), "run".into());
    frame.insert("program".to_owned(), program.into());
    frame.insert("namespaces".to_owned(), namespaces.into());
    frame.insert("maxOutputBytes".to_owned(), cap.into());
    frame.extend(extra);
    let mut out = serde_json::to_vec(&frame).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The rejection of a call frame over `max_frame_bytes`.
pub(crate) fn oversized_call(max_frame_bytes: u64) -> String {
    format!("binding arguments exceed {max_frame_bytes} bytes")
}

/// The rejection of a call frame that would cost too much host memory to decode.
pub(crate) fn costly_call() -> String {
    format!(
        "binding arguments would take more than {ALLOWANCE_PER_BYTE} times their size \
         (at least {} MiB) of host memory to decode",
        ALLOWANCE_FLOOR >> 20
    )
}

/// A finished binding call as the program may see it: the value (lossless, with its nesting
/// depth) or the failure the call rejects with.
pub(crate) type Reply = Result<(Value, usize), BindingError>;

/// A resolution checked for the program: lossless and at most [`MAX_DEPTH`] deep.
fn checked(result: Result<Value, BindingError>) -> Reply {
    let value = result?;
    match frame::inspect(&value) {
        Ok(depth) => Ok((value, depth)),
        Err(Unfit::Lossy) => Err(BindingError::new(
            "binding resolution must be lossless JSON",
        )),
        Err(Unfit::TooDeep) => Err(BindingError::new(format!(
            "binding resolution nests deeper than {MAX_DEPTH} levels"
        ))),
    }
}

/// The reply frame of call `id` for a process on the frame protocol.
pub(crate) fn reply_frame(id: u64, reply: Reply) -> Vec<u8> {
    match reply {
        Ok((value, depth)) => {
            let bytes = frame::reply_ok(id, &value, depth);
            frame::with_stack_for(depth, move || drop(value));
            bytes
        }
        Err(error) => frame::reply_failure(id, &error.message, error.code.as_deref()),
    }
}

/// Which binding a call names: by namespace and name (frame protocol, Monty), or by its number
/// over the request's namespaces and their names in order (the in-process QuickJS bootstrap).
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    Named(&'a str, &'a str),
    #[cfg_attr(not(feature = "embedded-js"), allow(dead_code))]
    Numbered(usize),
}

/// What became of a call the program made.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// An id seen before: a repeated frame, ignored.
    Repeated,
    /// One call too many: the run ends with this.
    Limit(Ending),
    /// Answered at once (refused, or its dispatch was ready when first polled).
    Answer(Reply),
    /// Under way; its reply comes from [`Calls::poll_next`].
    Pending,
}

type PendingCall = BoxFuture<'static, (u64, Result<Value, BindingError>)>;

/// The binding calls of one run.
pub(crate) struct Calls {
    /// `(global, name)` of every binding, in the order [`Target::Numbered`] counts them.
    bindings: Vec<(String, String)>,
    by_name: HashMap<String, HashMap<String, usize>>,
    dispatch: Option<BindingDispatch>,
    seen: HashSet<u64>,
    made: u64,
    max: u64,
    pending: FuturesUnordered<PendingCall>,
    signal: CancellationToken,
    /// A durable run's journal, and the sequence number of its next dispatched call.
    journal: Option<Journal>,
    seq: u64,
}

impl Calls {
    /// The calls of `request`, at most `max_binding_calls` of them.
    pub(crate) fn new(request: &RunRequest, max_binding_calls: u64) -> Self {
        let bindings: Vec<(String, String)> = request
            .bindings
            .iter()
            .flat_map(|ns| ns.names.iter().map(|n| (ns.global.clone(), n.clone())))
            .collect();
        let mut by_name: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (index, (global, name)) in bindings.iter().enumerate() {
            by_name
                .entry(global.clone())
                .or_default()
                .entry(name.clone())
                .or_insert(index);
        }
        Calls {
            bindings,
            by_name,
            dispatch: request.dispatch.clone(),
            seen: HashSet::new(),
            made: 0,
            max: max_binding_calls,
            pending: FuturesUnordered::new(),
            signal: CancellationToken::new(),
            journal: request.journal.clone(),
            seq: 0,
        }
    }

    /// Counts call `id` once; the ending when it is one call too many.
    fn count(&mut self, id: u64) -> Option<Admitted> {
        if !self.seen.insert(id) {
            return Some(Admitted::Repeated);
        }
        self.made += 1;
        (self.made > self.max).then(|| Admitted::Limit(Ending::call_limit(self.max)))
    }

    /// Takes call `id` to `target` with `args` (`None`: they were not lossless JSON). Every
    /// call counts against the limit, an unknown or refused one too. A dispatch that is ready
    /// when first polled is answered at once, on every transport alike.
    pub(crate) fn call(&mut self, id: u64, target: Target<'_>, args: Option<Value>) -> Admitted {
        if let Some(admitted) = self.count(id) {
            return admitted;
        }
        let index = match target {
            Target::Named(global, name) => {
                self.by_name.get(global).and_then(|n| n.get(name)).copied()
            }
            Target::Numbered(index) => (index < self.bindings.len()).then_some(index),
        };
        let Some(index) = index else {
            let message = match target {
                Target::Named(global, name) => format!("unknown binding \"{global}.{name}\""),
                Target::Numbered(index) => format!("unknown binding number {index}"),
            };
            return Admitted::Answer(Err(BindingError::new(message)));
        };
        let Some(args) = args else {
            return refused("binding arguments must be lossless JSON");
        };
        let Some(dispatch) = &self.dispatch else {
            return refused("no binding dispatcher installed");
        };
        let (global, name) = &self.bindings[index];
        let mut call = match &self.journal {
            None => dispatch(BindingCall::new(
                global.clone(),
                name.clone(),
                args,
                self.signal.child_token(),
            )),
            // A durable run: every dispatched call has its place in the journal, checked
            // against it and answered from it while it lasts.
            Some(Journal::Store(journal)) => {
                let seq = self.seq;
                self.seq += 1;
                let tool = format!("{global}.{name}");
                match journal.admit(seq, &tool, &args) {
                    Admit::End(kind, message) => {
                        return Admitted::Limit(Ending::Fail(kind, message));
                    }
                    Admit::Answer(result) => return Admitted::Answer(checked(result)),
                    Admit::Unknown(answer) => answer,
                    Admit::Live(slot) => {
                        let mut binding = BindingCall::new(
                            global.clone(),
                            name.clone(),
                            args.clone(),
                            self.signal.child_token(),
                        );
                        binding.park = Some(slot.clone());
                        journal.live(seq, tool, &args, slot, dispatch(binding))
                    }
                }
            }
            // Restate's journal: the call is one journaled step of the invocation, run or
            // answered from the journal there.
            #[cfg(feature = "restate")]
            Some(Journal::Steps(steps)) => {
                let seq = self.seq;
                self.seq += 1;
                let (dispatch, signal) = (std::sync::Arc::clone(dispatch), self.signal.clone());
                let (tool, callee, call_args) = (global.clone(), name.clone(), args.clone());
                // Made again, approved, when the person approves the call whose `Ask` parked it.
                let make: crate::durable::steps::MakeCall = std::sync::Arc::new(move |slot| {
                    let mut binding = BindingCall::new(
                        tool.clone(),
                        callee.clone(),
                        call_args.clone(),
                        signal.child_token(),
                    );
                    binding.park = Some(slot);
                    dispatch(binding)
                });
                steps.call(seq, format!("{global}.{name}"), &args, make)
            }
        };
        // Polled once here with no waker: `FuturesUnordered` polls what is pushed to it anew.
        match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(result) => Admitted::Answer(checked(result)),
            Poll::Pending => {
                self.pending.push(Box::pin(async move { (id, call.await) }));
                Admitted::Pending
            }
        }
    }

    /// A call frame the host will not decode (`message` says why): counted as a call and
    /// answered with a rejection.
    pub(crate) fn refuse(&mut self, id: u64, message: String) -> Admitted {
        self.count(id)
            .unwrap_or(Admitted::Answer(Err(BindingError::new(message))))
    }

    /// Whether no call is under way.
    pub(crate) fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The next finished call; `Pending` while none is (and for ever when [`idle`](Self::idle)).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<(u64, Reply)> {
        match self.pending.poll_next_unpin(cx) {
            Poll::Ready(Some((id, result))) => Poll::Ready((id, checked(result))),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    /// [`poll_next`](Self::poll_next) as a future, for a `select!` branch.
    pub(crate) fn next(&mut self) -> impl Future<Output = (u64, Reply)> + '_ {
        std::future::poll_fn(|cx| self.poll_next(cx))
    }

    /// Stops every call in flight: the run has settled.
    pub(crate) fn settle(&mut self) {
        self.signal.cancel();
        self.pending = FuturesUnordered::new();
    }
}

/// What a frame from a process on the frame protocol asks of its transport.
pub(crate) enum Step {
    /// A log entry for the transport's ledger.
    Log(String),
    /// The run ends.
    End(Ending),
    /// This reply frame goes back to the process.
    Reply(Vec<u8>),
    /// Nothing to do now (a call under way, a repeated id).
    Nothing,
}

impl Calls {
    /// What `frame` asks: a log, the run's end, or a call admitted and, if answered at once,
    /// its reply frame.
    pub(crate) fn on_frame(&mut self, frame: ChildFrame) -> Step {
        match frame {
            ChildFrame::Log { text } => Step::Log(text),
            ChildFrame::Done(completion) => Step::End(completion.into()),
            ChildFrame::Costly { id } => {
                let admitted = self.refuse(id, costly_call());
                Self::step(id, admitted)
            }
            ChildFrame::Call {
                id,
                global,
                name,
                args,
            } => {
                let admitted = self.call(id, Target::Named(&global, &name), args);
                Self::step(id, admitted)
            }
        }
    }

    /// A call frame over `max_frame_bytes`, which the host never buffered whole.
    pub(crate) fn on_oversized(&mut self, id: u64, max_frame_bytes: u64) -> Step {
        let admitted = self.refuse(id, oversized_call(max_frame_bytes));
        Self::step(id, admitted)
    }

    fn step(id: u64, admitted: Admitted) -> Step {
        match admitted {
            Admitted::Repeated | Admitted::Pending => Step::Nothing,
            Admitted::Limit(ending) => Step::End(ending),
            Admitted::Answer(reply) => Step::Reply(reply_frame(id, reply)),
        }
    }
}

fn refused(message: &str) -> Admitted {
    Admitted::Answer(Err(BindingError::new(message)))
}

/// Splits a raw output stream (a process's stdout or stderr) into log entries, one per line; a
/// line longer than `max` bytes is cut there, so a stream with no newline holds at most `max`
/// bytes of the host's memory.
pub(crate) struct Lines {
    line: Vec<u8>,
    max: usize,
}

impl Lines {
    /// A splitter cutting lines at `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Lines {
            line: Vec::new(),
            max,
        }
    }

    /// Appends the entries `bytes` completes to `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
            let (body, complete) = match chunk.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (chunk, false),
            };
            let mut body = body;
            while self.line.len() + body.len() > self.max {
                let room = self.max - self.line.len();
                self.line.extend_from_slice(&body[..room]);
                body = &body[room..];
                out.push(self.take());
            }
            self.line.extend_from_slice(body);
            if complete {
                out.push(self.take());
            }
        }
    }

    /// The final unterminated line, if there is one.
    pub(crate) fn finish(&mut self) -> Option<String> {
        (!self.line.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt;
    use serde_json::json;

    use super::*;
    use crate::code_runtime::BindingNamespace;

    fn request(dispatch: Option<BindingDispatch>) -> RunRequest {
        let mut request = RunRequest::new("").binding(BindingNamespace::tools(["echo"]));
        request.dispatch = dispatch;
        request
    }

    fn rejection(admitted: Admitted) -> String {
        match admitted {
            Admitted::Answer(Err(error)) => error.message,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn unknown_bindings_are_named_and_counted() {
        let mut calls = Calls::new(&request(None), 2);
        assert_eq!(
            rejection(calls.call(1, Target::Named("tools", "rm"), Some(json!({})))),
            "unknown binding \"tools.rm\""
        );
        assert_eq!(
            rejection(calls.call(2, Target::Numbered(7), Some(json!({})))),
            "unknown binding number 7"
        );
        match calls.call(3, Target::Named("tools", "echo"), Some(json!({}))) {
            Admitted::Limit(Ending::Fail(FailureKind::BindingLimit, message)) => {
                assert_eq!(message, "binding call limit reached (2 calls)");
            }
            other => panic!("expected the limit, got {other:?}"),
        }
    }

    #[test]
    fn a_repeated_id_is_ignored_and_not_counted() {
        let mut calls = Calls::new(&request(None), 1);
        assert!(matches!(
            calls.refuse(1, costly_call()),
            Admitted::Answer(Err(_))
        ));
        assert!(matches!(calls.refuse(1, costly_call()), Admitted::Repeated));
    }

    #[test]
    fn a_ready_dispatch_is_answered_at_once_and_checked() {
        let dispatch: BindingDispatch =
            Arc::new(|call: BindingCall| async move { Ok(call.args) }.boxed());
        let mut calls = Calls::new(&request(Some(dispatch)), 10);
        match calls.call(1, Target::Numbered(0), Some(json!([1]))) {
            Admitted::Answer(Ok((value, depth))) => {
                assert_eq!(value, json!([1]));
                assert_eq!(depth, 1);
            }
            other => panic!("expected an answer, got {other:?}"),
        }
        assert!(calls.idle());
        assert_eq!(
            rejection(calls.call(2, Target::Numbered(0), None)),
            "binding arguments must be lossless JSON"
        );
    }

    #[test]
    fn output_lines_are_cut_at_their_cap() {
        let mut lines = Lines::new(4);
        let mut out = Vec::new();
        lines.feed(b"ab\ncdefghij", &mut out);
        assert_eq!(out, ["ab", "cdef"]);
        lines.feed(b"k\nl", &mut out);
        assert_eq!(out, ["ab", "cdef", "ghij", "k"]);
        assert_eq!(lines.finish().as_deref(), Some("l"));
        assert_eq!(lines.finish(), None);
    }
}
