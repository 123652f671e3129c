//! The binding calls of one run, the same on every code runtime ([`Calls`]: id de-duplication,
//! the call limit, admission, dispatch, replies), and the frames that carry a run's program and
//! its replies to a process.
//!
//! Each transport — the pipes to a child process (`subprocess/`), the shared-memory ring to a
//! pooled worker (the engines crate's `pool/`), the interpreter thread in the host (its
//! `driver.rs`) — moves frames and watches its own process or thread (`watch.rs`), and asks this module what a
//! call means and `ending.rs` what an ending means. So a program meets the same messages and
//! failure kinds on every runtime.
//!
//! A call to a binding the run does not have can come only from a program that reaches the raw
//! call entry (Monty's `_dsh_call`, a frame forged on a child's protocol pipe): the bindings the
//! bootstraps build name only the run's own.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::task::{Context, Poll, Waker};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::ending::Ending;
use super::frame::{self, ALLOWANCE_FLOOR, ALLOWANCE_PER_BYTE, ChildFrame, MAX_DEPTH};
use super::journal::{Admission, MakeCall, RunJournal};
use super::value_text::Unfit;
use super::{BindingCall, BindingDispatch, BindingError, RunRequest};

/// The `run` frame that hands a process its program: the program, the binding namespaces as the
/// bootstraps read them, the output cap (`maxOutputBytes`) and the transport's own keys `extra`.
pub fn run_frame(
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
pub type CheckedResolution = Result<(Value, usize), BindingError>;

/// A resolution checked for the program: lossless and at most [`MAX_DEPTH`] deep.
fn checked(result: Result<Value, BindingError>) -> CheckedResolution {
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
pub fn reply_frame(id: u64, reply: CheckedResolution) -> Vec<u8> {
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
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The binding `name` (second) of the namespace whose global is the first.
    Named(&'a str, &'a str),
    /// The binding at this place, counting every namespace's names in the request's order.
    Numbered(usize),
}

/// What became of a call the program made.
#[derive(Debug)]
pub enum Admitted {
    /// An id seen before: a repeated frame, ignored.
    Repeated,
    /// One call too many: the run ends with this.
    Limit(Ending),
    /// Answered at once (refused, or its dispatch was ready when first polled).
    Answer(CheckedResolution),
    /// Under way; its reply comes from [`Calls::poll_next`].
    Pending,
}

type PendingCall = BoxFuture<'static, (u64, Result<Value, BindingError>)>;

/// The binding calls of one run.
pub struct Calls {
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
    journal: Option<std::sync::Arc<dyn RunJournal>>,
    seq: u64,
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The dispatcher and the calls in flight are closures and futures.
        f.debug_struct("Calls")
            .field("bindings", &self.bindings)
            .field("made", &self.made)
            .field("max", &self.max)
            .field("pending", &self.pending.len())
            .field("journaled", &self.journal.is_some())
            .finish_non_exhaustive()
    }
}

impl Calls {
    /// The calls of `request`, at most `max_binding_calls` of them.
    pub fn new(request: &RunRequest, max_binding_calls: u64) -> Self {
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
    pub fn call(&mut self, id: u64, target: Target<'_>, args: Option<Value>) -> Admitted {
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
            // A durable run: every dispatched call has its place in the journal, which runs
            // it, answers it from what it holds, or ends the run.
            Some(journal) => {
                let seq = self.seq;
                self.seq += 1;
                let (dispatch, signal) = (std::sync::Arc::clone(dispatch), self.signal.clone());
                let (namespace, callee, call_args) = (global.clone(), name.clone(), args.clone());
                let make: MakeCall = std::sync::Arc::new(move |slot| {
                    let mut binding = BindingCall::new(
                        namespace.clone(),
                        callee.clone(),
                        call_args.clone(),
                        signal.child_token(),
                    );
                    binding.park = Some(slot);
                    dispatch(binding)
                });
                let tool = format!("{global}.{name}");
                match std::sync::Arc::clone(journal).admit(seq, tool, &args, make) {
                    Admission::End(kind, message) => {
                        return Admitted::Limit(Ending::Fail(kind, message));
                    }
                    Admission::Answer(result) => return Admitted::Answer(checked(result)),
                    Admission::Run(call) => call,
                }
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
    pub fn refuse(&mut self, id: u64, message: String) -> Admitted {
        self.count(id)
            .unwrap_or(Admitted::Answer(Err(BindingError::new(message))))
    }

    /// Whether no call is under way.
    pub fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The next finished call; `Pending` while none is (and for ever when [`idle`](Self::idle)).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<(u64, CheckedResolution)> {
        match self.pending.poll_next_unpin(cx) {
            Poll::Ready(Some((id, result))) => Poll::Ready((id, checked(result))),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    /// [`poll_next`](Self::poll_next) as a future, for a `select!` branch.
    pub fn next_reply(&mut self) -> impl Future<Output = (u64, CheckedResolution)> + '_ {
        std::future::poll_fn(|cx| self.poll_next(cx))
    }

    /// Stops every call in flight: the run has settled.
    pub fn settle(&mut self) {
        self.signal.cancel();
        self.pending = FuturesUnordered::new();
    }
}

/// What a frame from a process on the frame protocol asks of its transport.
#[derive(Debug)]
pub enum Step {
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
    pub fn on_frame(&mut self, frame: ChildFrame) -> Step {
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
    pub fn on_oversized(&mut self, id: u64, max_frame_bytes: u64) -> Step {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt;
    use serde_json::json;

    use super::*;
    use crate::code_runtime::{BindingNamespace, FailureKind};

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
}
