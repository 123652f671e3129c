//! The Monty interpreter loop: one `run` frame's program in a fresh interpreter, its binding
//! calls, `print` output and completion going through a [`Link`] (the shared rings in a worker
//! process, the host's dispatcher on a host thread), and its failure as CPython prints it.

use std::collections::HashMap;
use std::fmt::Write as _;

use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    PrintWriter, PrintWriterCallback, ResourceLimits, ResourceTracker,
};
use serde_json::Value;

use super::program::{CALL, wrap};
use super::values::{BindingReply, Unfit, encode};
use dsh_tool_code_mode::__engines::{json_str_len, longest_prefix};
use dsh_tool_code_mode::code_runtime::frame::MAX_DEPTH as MAX_FRAME_DEPTH;

/// The file name the host gives the program in tracebacks.
const SCRIPT: &str = "program.py";

/// The run's way out ended it early (the host is gone, or it settled the run itself).
pub(crate) struct Halt;

/// Where a run's binding calls and output go and its replies come from: the shared rings in
/// a worker process, the host's dispatcher for a run inside the host.
pub(crate) trait Link {
    /// Hands call `id` over; `args` is its JSON text. `Ok(Err(message))`: the call fails in
    /// the program at once with `message`.
    fn call(
        &mut self,
        id: u64,
        global: &str,
        name: &str,
        args: &str,
    ) -> Result<Result<(), String>, Halt>;
    /// Waits until at least one reply has come, then appends every reply there is.
    fn replies(&mut self, out: &mut Vec<(u64, BindingReply)>) -> Result<(), Halt>;
    /// One line the program printed.
    fn log(&mut self, text: &str) -> Result<(), Halt>;
    /// Sends what is buffered.
    fn flush(&mut self) -> Result<(), Halt>;
}

/// The program's `print` output, cut into lines for a [`Link`]. A line whose JSON string form
/// grows past the output cap plus [`LINE_SLACK`] is cut there and sent at once, the rest of it
/// dropped: it cannot fit anyway, and the worker does not hold it. What is sent still costs more
/// than the cap, so the host's ledger ends the run with its `output-limit` and keeps the prefix
/// of it that fits, as for every runtime; and its frame stays within the host's frame bound.
struct Printer<'l, L: Link> {
    link: &'l mut L,
    line: String,
    /// The JSON string length of `line`, quotes included.
    cost: u64,
    cap: u64,
    halted: bool,
}

/// Bytes a line's JSON string form may take past the output cap before it is cut. A cut line
/// then costs at least the cap plus this less one character (at most 6 bytes): more than the
/// cap, so never taken for a line that fits.
const LINE_SLACK: u64 = 8;

impl<L: Link> Printer<'_, L> {
    fn end_line(&mut self) -> Result<(), MontyException> {
        let sent = self.link.log(&self.line);
        self.line.clear();
        self.cost = 2;
        sent.map_err(|Halt| self.halt())
    }

    /// Adds `text` to the line; a line that grows past its bound is cut and sent.
    fn append(&mut self, text: &str) -> Result<(), MontyException> {
        let room = (self.cap + LINE_SLACK + 2).saturating_sub(self.cost);
        let kept = longest_prefix(text, room);
        self.line.push_str(kept);
        self.cost += json_str_len(kept) - 2;
        if kept.len() < text.len() {
            self.end_line()?;
        }
        Ok(())
    }

    fn halt(&mut self) -> MontyException {
        self.halted = true;
        MontyException::new(ExcType::RuntimeError, Some("the run has ended".to_owned()))
    }
}

impl<L: Link> PrintWriterCallback for Printer<'_, L> {
    fn stdout_write(&mut self, output: std::borrow::Cow<'_, str>) -> Result<(), MontyException> {
        let mut parts = output.split('\n');
        if let Some(head) = parts.next() {
            self.append(head)?;
        }
        for part in parts {
            self.end_line()?;
            self.append(part)?;
        }
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        if end == '\n' {
            self.end_line()
        } else {
            self.append(end.encode_utf8(&mut [0; 4]))
        }
    }

    fn poll_flush(&mut self) -> Result<(), MontyException> {
        self.link.flush().map_err(|Halt| self.halt())
    }
}

/// How a run ended on the interpreter's side.
pub(crate) enum Finish {
    /// The `done` frame of the run (without its newline).
    Done(String),
    /// The link halted the run.
    Halted,
}

/// Runs one `run` frame's program in a fresh interpreter.
pub(crate) fn execute<L: Link>(run: &Value, link: &mut L) -> Finish {
    let program = run["program"].as_str().unwrap_or_default();
    let namespaces = run["namespaces"].as_array().map_or(&[][..], Vec::as_slice);
    let cap = run["maxOutputBytes"].as_u64().unwrap_or(64 << 20);
    let (source, body_lines) = wrap(program, namespaces);
    let mut printer = Printer {
        link,
        line: String::new(),
        cost: 2,
        cap,
        halted: false,
    };
    let finish = interpret(source, body_lines, &mut printer);
    match finish {
        Finish::Done(done) if !printer.halted => {
            // A last line without a newline is a line too.
            if !printer.line.is_empty() && printer.end_line().is_err() {
                return Finish::Halted;
            }
            Finish::Done(done)
        }
        _ => Finish::Halted,
    }
}

fn interpret<L: Link>(source: String, body_lines: u32, printer: &mut Printer<'_, L>) -> Finish {
    let cap = printer.cap;
    let fail =
        |e: &MontyException| Finish::Done(done_error("exception", &describe(e, body_lines, cap)));
    let runner = match MontyRun::new(
        source,
        SCRIPT,
        vec![CALL.to_owned()],
        CompileOptions::default(),
    ) {
        Ok(runner) => runner,
        Err(e) => return fail(&e),
    };
    // Time, memory and calls are the host's to count. Recursion stays bounded so that the
    // native stack cannot overflow; Monty converts values under the same bound, so it is
    // set to let values of the protocol's depth cross.
    let tracker = ResourceTracker::new(ResourceLimits {
        max_suspensions: usize::MAX,
        max_recursion_depth: MAX_FRAME_DEPTH + 16,
        ..ResourceLimits::default()
    });
    let call = MontyObject::Function {
        name: CALL.to_owned(),
        docstring: None,
    };
    let mut progress = runner.start(vec![call], tracker, PrintWriter::Callback(printer));
    let mut next_id: u64 = 0;
    // Monty's call id → the protocol's call id, for the calls in flight.
    let mut in_flight: HashMap<u64, u32> = HashMap::new();
    // Calls refused here, answered at the next wait.
    let mut refused: Vec<(u32, ExtFunctionResult)> = Vec::new();
    let mut replies: Vec<(u64, BindingReply)> = Vec::new();
    let mut args = String::new();
    loop {
        if printer.halted {
            return Finish::Halted;
        }
        progress = match progress {
            Err(e) => return fail(&e),
            Ok(RunProgress::Complete(value)) => {
                if printer.link.flush().is_err() {
                    return Finish::Halted;
                }
                return Finish::Done(done_value(&value));
            }
            Ok(RunProgress::FunctionCall(call)) => {
                if call.function_name != CALL || call.object_id.is_some() {
                    let name = call.function_name.clone();
                    call.resume(
                        ExtFunctionResult::NotFound(name),
                        PrintWriter::Callback(printer),
                    )
                } else {
                    let refusal = match call_parts(&call.args, &mut args) {
                        Ok((global, name)) => {
                            next_id += 1;
                            match printer.link.call(next_id, global, name, &args) {
                                Err(Halt) => return Finish::Halted,
                                Ok(Ok(())) => {
                                    in_flight.insert(next_id, call.call_id);
                                    None
                                }
                                Ok(Err(message)) => Some(message),
                            }
                        }
                        Err(message) => Some(message),
                    };
                    if let Some(message) = refusal {
                        refused.push((
                            call.call_id,
                            ExtFunctionResult::Return(failure_tuple(message, None)),
                        ));
                    }
                    call.resume_pending(PrintWriter::Callback(printer))
                }
            }
            Ok(RunProgress::ResolveFutures(state)) => {
                // Wait for a reply unless a refusal is due, then take every reply there.
                let mut results = std::mem::take(&mut refused);
                if results.is_empty() && printer.link.replies(&mut replies).is_err() {
                    return Finish::Halted;
                }
                for (id, reply) in replies.drain(..) {
                    if let Some(monty_id) = in_flight.remove(&id) {
                        let value = match reply {
                            BindingReply::Ok(value) => MontyObject::Tuple(vec![
                                MontyObject::Bool(true),
                                value,
                                MontyObject::None,
                            ]),
                            BindingReply::Err(message, code) => failure_tuple(message, code),
                        };
                        results.push((monty_id, ExtFunctionResult::Return(value)));
                    }
                }
                let pending = state.pending_call_ids();
                results.retain(|(id, _)| pending.contains(id));
                state.resume(results, PrintWriter::Callback(printer))
            }
            Ok(RunProgress::NameLookup(lookup)) => {
                lookup.resume(NameLookupResult::Undefined, PrintWriter::Callback(printer))
            }
            Ok(RunProgress::OsCall(os)) => os.resume(
                ExtFunctionResult::Error(MontyException::new(
                    ExcType::PermissionError,
                    Some("no filesystem, network, environment or processes here".to_owned()),
                )),
                PrintWriter::Callback(printer),
            ),
        };
    }
}

fn failure_tuple(message: String, code: Option<String>) -> MontyObject {
    MontyObject::Tuple(vec![
        MontyObject::Bool(false),
        MontyObject::String(message),
        code.map_or(MontyObject::None, MontyObject::String),
    ])
}

/// The global and name of a `_dsh_call(global, name, args)` call, its arguments' JSON put
/// in `json`; or the message the call fails with.
fn call_parts<'a>(
    args: &'a [MontyObject],
    json: &mut String,
) -> Result<(&'a str, &'a str), String> {
    let [
        MontyObject::String(global),
        MontyObject::String(name),
        value,
    ] = args
    else {
        return Err("bindings take one argument".to_owned());
    };
    json.clear();
    encode(value, json, 0).map_err(|unfit| match unfit {
        Unfit::Lossy => "binding arguments must be lossless JSON".to_owned(),
        Unfit::Deep => format!("binding arguments nest deeper than {MAX_FRAME_DEPTH} levels"),
    })?;
    Ok((global, name))
}

fn done_value(value: &MontyObject) -> String {
    if matches!(value, MontyObject::None) {
        return r#"{"type":"done"}"#.to_owned();
    }
    // The value's JSON is written into the frame itself: a copy would count against the
    // worker's heap budget.
    let mut frame = String::from(r#"{"type":"done","value":"#);
    match encode(value, &mut frame, 0) {
        Ok(()) => {
            frame.push('}');
            frame
        }
        Err(Unfit::Lossy) => done_error(
            "invalid-output",
            "the program's value is not lossless JSON (finite numbers, integers within ±(2^53 − 1), strings, lists, tuples and dicts with string keys)",
        ),
        Err(Unfit::Deep) => done_error(
            "invalid-output",
            &format!("the program's value nests deeper than {MAX_FRAME_DEPTH} levels"),
        ),
    }
}

fn done_error(kind: &str, message: &str) -> String {
    // Written into the frame directly: a copy of a long message would count against the
    // worker's heap budget.
    let mut frame = Vec::from(r#"{"type":"done","error":{"kind":"#);
    // Writing a string into a `Vec` cannot fail, and JSON text is UTF-8.
    let _ = serde_json::to_writer(&mut frame, kind);
    frame.extend_from_slice(br#","message":"#);
    let _ = serde_json::to_writer(&mut frame, message);
    frame.extend_from_slice(b"}}");
    String::from_utf8(frame).unwrap_or_default()
}

/// The exception as CPython prints it, with the program's own line numbers and without the
/// frames of the wrapper. A description longer than the output cap (`cap` bytes) is cut just
/// past it: it ends the run as `output-limit` either way, and the rest would only cost the
/// worker's heap.
fn describe(e: &MontyException, body_lines: u32, cap: u64) -> String {
    let mut out = String::new();
    let frames: Vec<_> = e
        .traceback()
        .iter()
        .filter(|f| f.start.line >= 2 && f.start.line <= body_lines + 1)
        .collect();
    if !frames.is_empty() {
        out.push_str("Traceback (most recent call last):\n");
        let shown: Vec<(u32, &str)> = frames
            .iter()
            .map(|frame| {
                let name = match frame.frame_name.as_deref() {
                    None | Some("__dsh_program") => "<module>",
                    Some(name) => name,
                };
                (frame.start.line - 1, name)
            })
            .collect();
        // As CPython: three of a run of identical frames, then how many more there were.
        let mut i = 0;
        while i < shown.len() {
            let run = shown[i..].iter().take_while(|f| **f == shown[i]).count();
            for _ in 0..run.min(3) {
                let _ = writeln!(
                    out,
                    "  File \"{SCRIPT}\", line {}, in {}",
                    shown[i].0, shown[i].1
                );
            }
            if run > 3 {
                let _ = writeln!(out, "  [Previous line repeated {} more times]", run - 3);
            }
            i += run;
        }
    }
    let _ = write!(out, "{}", e.exc_type());
    if let Some(message) = e.message() {
        out.push_str(": ");
        let room = usize::try_from(cap)
            .unwrap_or(usize::MAX)
            .saturating_add(1)
            .saturating_sub(out.len());
        out.push_str(&message[..message.floor_char_boundary(room)]);
    }
    out
}
