//! Monty on an interpreter thread of the host ([`EmbeddedRuntime::python_in_process`]), for
//! measuring the worker pool against: the worker's interpreter loop, with binding calls
//! dispatched and polled on the interpreter thread as QuickJS's are, instead of frames on a
//! pipe.
//!
//! [`EmbeddedRuntime::python_in_process`]: crate::EmbeddedRuntime::python_in_process

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::sync::oneshot;

use dsh_tool_code_mode::__engines::bootstrap_form;
use dsh_tool_code_mode::code_runtime::frame::{self, ChildFrame, Completion};
use dsh_tool_code_mode::code_runtime::{FailureKind, OutputLedger, RunOutcome};

use super::interpreter::{self, Finish, Halt, Link};
use super::values::{self, BindingReply};
use crate::driver::{self, Calls, Ending, Job, Stop, Submitted, Target, Unpark, Watch, parse_json};

/// Longest wait between two checks of the budgets while calls are in flight.
const CHECK_EVERY: Duration = Duration::from_millis(10);

struct Inline<'j> {
    calls: Calls,
    /// The interpreter's id of each call in flight, by the id [`Calls`] gave it.
    ids: HashMap<u64, u64>,
    ready: Vec<(u64, driver::CheckedResolution)>,
    watch: &'j Watch,
    ledger: OutputLedger,
    logs: Vec<String>,
    ending: Option<Ending>,
    waker: Waker,
}

impl Link for Inline<'_> {
    fn call(
        &mut self,
        id: u64,
        global: &str,
        name: &str,
        args: &str,
    ) -> Result<Result<(), String>, Halt> {
        match self
            .calls
            .submit(Target::Named(global, name), parse_json(args))
        {
            Submitted::Dispatched(ours) => {
                self.ids.insert(ours, id);
                Ok(Ok(()))
            }
            Submitted::Limit(ending) => {
                self.ending = Some(ending);
                Err(Halt)
            }
        }
    }

    fn replies(&mut self, out: &mut Vec<(u64, BindingReply)>) -> Result<(), Halt> {
        let mut cx = Context::from_waker(&self.waker);
        loop {
            self.calls.poll_ready(&mut cx, self.watch, &mut self.ready);
            if !self.ready.is_empty() {
                for (ours, result) in self.ready.drain(..) {
                    let Some(id) = self.ids.remove(&ours) else {
                        continue;
                    };
                    let reply = match result {
                        Ok((value, _depth)) => BindingReply::Ok(values::decode(&value)),
                        Err(error) => BindingReply::Err(error.message, error.code),
                    };
                    out.push((id, reply));
                }
                return Ok(());
            }
            if self.watch.check() {
                return Err(Halt);
            }
            std::thread::park_timeout(self.watch.wall_left().min(CHECK_EVERY));
        }
    }

    fn log(&mut self, text: &str) -> Result<(), Halt> {
        match self.ledger.push_log(&mut self.logs, text) {
            Ok(()) => Ok(()),
            Err(diagnostic) => {
                self.ending = Some(Ending::Overflow(diagnostic));
                Err(Halt)
            }
        }
    }

    /// Called from Monty's periodic checkpoint: where a hot loop meets the budgets.
    fn flush(&mut self) -> Result<(), Halt> {
        if self.watch.check() {
            Err(Halt)
        } else {
            Ok(())
        }
    }
}

/// Runs the job's program on this thread and sends its outcome.
pub(crate) fn run(mut job: Job, tx: oneshot::Sender<RunOutcome>) {
    let _tokio = job.handle.enter();
    let lane = job.lane.take();
    let watch = Watch::new(&job);
    let mut link = Inline {
        calls: Calls::new(&job, lane),
        ids: HashMap::new(),
        ready: Vec::new(),
        watch: &watch,
        ledger: OutputLedger::new(job.config.budgets.max_output_bytes),
        logs: Vec::new(),
        ending: None,
        waker: Waker::from(Arc::new(Unpark(std::thread::current()))),
    };
    let namespaces: Vec<serde_json::Value> =
        job.request.bindings.iter().map(bootstrap_form).collect();
    let run = serde_json::json!({
        "program": job.program,
        "namespaces": namespaces,
        "maxOutputBytes": job.config.budgets.max_output_bytes,
    });
    let ending = match interpreter::execute(&run, &mut link) {
        Finish::Done(done) => match frame::decode_child_frame(done.as_bytes()) {
            Some(ChildFrame::Done(Completion::Value(value))) => Ending::Done(value),
            Some(ChildFrame::Done(Completion::Failure { kind, message })) => {
                Ending::Fail(kind, message)
            }
            _ => Ending::Fail(
                FailureKind::InvalidOutput,
                "program completion must be lossless JSON".to_owned(),
            ),
        },
        Finish::Halted => link
            .ending
            .take()
            .unwrap_or_else(|| watch.failure(watch.stopped().unwrap_or(Stop::Settled))),
    };
    link.calls.settle();
    let outcome = driver::outcome(&mut link.ledger, link.logs, ending);
    let _ = tx.send(outcome);
}
