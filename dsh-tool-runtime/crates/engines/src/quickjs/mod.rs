//! The QuickJS engine (through `rquickjs`): one fresh runtime and context per run, driven on the
//! run's own thread, with binding calls polled on that thread between interpreter jobs. The
//! thread is one of the host's or, in a pooled worker process, the worker's (`worker/quickjs.rs`);
//! values cross between the interpreter's heap and the host in `values.rs`.

// The engine: QuickJS through rquickjs's raw API, here and in `values.rs` (the worker's
// `worker/quickjs.rs` allows it for its one block); every block notes its SAFETY.
#![allow(unsafe_code)]

mod values;

use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

use rquickjs::allocator::{Allocator, RustAllocator};
use rquickjs::context::EvalOptions;
use rquickjs::function::Opt;
use rquickjs::module::WriteOptions;
use rquickjs::{Context, Ctx, Function, Module, Object, Runtime};
use tokio::sync::oneshot;

use dsh_tool_code_mode::__engines::{Ending, bootstrap_form, canonical, javascript_bootstrap};
use dsh_tool_code_mode::code_runtime::frame::{self, MAX_DEPTH as MAX_FRAME_DEPTH};
use dsh_tool_code_mode::code_runtime::{FailureKind, OutputLedger, RunOutcome};

use crate::driver::{
    self, Calls, INTERPRETER_STACK_BYTES, Job, Relay, Stop, Submitted, Target, Unpark, Watch,
    parse_json,
};
use values::{Read, Reader};

static BOOTSTRAP: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| javascript_bootstrap(dsh_sdk_templates::EMBEDDED_QUICKJS_JS));

/// The bootstrap compiled once per process into QuickJS bytecode, as a module whose default
/// export is the bootstrap's function: parsing its source took about 450 µs of every run's start,
/// loading the bytecode takes a fraction of that. `None` only if this build's bootstrap does not
/// compile, which every run would then report.
static BOOTSTRAP_BYTECODE: std::sync::LazyLock<Option<Vec<u8>>> = std::sync::LazyLock::new(|| {
    let rt = Runtime::new().ok()?;
    let context = Context::full(&rt).ok()?;
    context.with(|ctx| {
        let source = format!("export default {}", BOOTSTRAP.as_str());
        let module = Module::declare(ctx, "bootstrap.js", source).ok()?;
        module.write(WriteOptions::default()).ok()
    })
});

/// The bootstrap's function, loaded from [`BOOTSTRAP_BYTECODE`] into `ctx`.
fn bootstrap<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let bytes = BOOTSTRAP_BYTECODE
        .as_deref()
        .ok_or(rquickjs::Error::Unknown)?;
    // SAFETY: the bytes are bytecode written by this same QuickJS build from our own bootstrap,
    // so they are valid; they are read into the context's own heap.
    let module = unsafe { Module::load(ctx.clone(), bytes) }?;
    let (module, evaluated) = module.eval()?;
    evaluated.finish::<()>()?;
    module.get("default")
}

/// The failure of a program that awaits what nothing can settle: this interpreter has no timers
/// or I/O, so only a call in flight could.
const STUCK: &str =
    "the program waits for a promise that nothing can settle: no tool call is in flight";

/// Interpreter heap beyond `max_memory_mb` for the runtime, context and bootstrap themselves.
const BASE_HEAP_BYTES: usize = 4 << 20;

/// The interpreter's allocator: rquickjs's Rust-heap allocator (each block carries its size,
/// so this needs no platform `malloc_usable_size`), counted, refusing what would exceed the
/// budget. A refusal stops the run (`memory-limit`) even if the program catches the error it
/// raises.
struct Budgeted {
    used: usize,
    cap: usize,
    watch: Arc<Watch>,
}

impl Budgeted {
    fn refuse(&self) -> *mut u8 {
        self.watch.raise(Stop::Memory);
        std::ptr::null_mut()
    }

    fn admits(&self, size: usize) -> bool {
        self.used.saturating_add(size) <= self.cap
    }

    /// Counts a block the inner allocator just handed out (null: refused).
    fn took(&mut self, ptr: *mut u8) -> *mut u8 {
        if ptr.is_null() {
            return self.refuse();
        }
        // SAFETY: `ptr` was just returned by `RustAllocator`.
        self.used += unsafe { RustAllocator::usable_size(ptr) };
        ptr
    }
}

// SAFETY: every pointer handed out comes from `RustAllocator` and is given back to it; null
// pointers and zero sizes, which it does not take, are handled here.
unsafe impl Allocator for Budgeted {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        let size = size.max(1);
        if !self.admits(size) {
            return self.refuse();
        }
        let ptr = RustAllocator.alloc(size);
        self.took(ptr)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        // Checked here: `RustAllocator` panics on an overflowing product.
        let Some(total) = count.checked_mul(size) else {
            return self.refuse();
        };
        if !self.admits(total.max(1)) {
            return self.refuse();
        }
        let ptr = RustAllocator.calloc(count.max(1), size.max(1));
        self.took(ptr)
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: the caller hands back a pointer from this allocator.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        if new_size == 0 {
            // SAFETY: as `dealloc`.
            unsafe { self.dealloc(ptr) };
            return std::ptr::null_mut();
        }
        // SAFETY: the caller hands back a pointer from this allocator.
        let old = unsafe { RustAllocator::usable_size(ptr) };
        if new_size > old && !self.admits(new_size - old) {
            return self.refuse();
        }
        // SAFETY: `ptr` is live and from `RustAllocator`; on failure it stays valid and is kept.
        let grown = unsafe { RustAllocator.realloc(ptr, new_size) };
        if grown.is_null() {
            return self.refuse();
        }
        // SAFETY: `grown` was just returned by `RustAllocator`.
        let now = unsafe { RustAllocator::usable_size(grown) };
        self.used = self.used.saturating_sub(old) + now;
        grown
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller passes a pointer from this allocator.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}

/// The run's state the host functions and the driver loop share (on the interpreter thread).
struct State {
    ledger: OutputLedger,
    logs: Vec<String>,
    ending: Option<Ending>,
    calls: Calls,
    /// The host of a run in a worker process: logs go to it, replies come from it.
    relay: Option<Box<dyn Relay>>,
}

impl State {
    /// Settles the run with `ending` unless it has already ended.
    fn end(&mut self, watch: &Watch, ending: Ending) {
        if self.ending.is_none() && watch.stopped().is_none() {
            self.ending = Some(ending);
            watch.raise(Stop::Settled);
        }
    }
}

/// A call in flight: the resolving functions of the promise the program awaits, settled by
/// the host when the reply arrives.
struct Waiting<'js> {
    resolve: Function<'js>,
    reject: Function<'js>,
    binding: usize,
}

/// The calls in flight by id. Emptied before the interpreter is torn down: the collector does
/// not see the references held here.
type Waiters<'js> = Rc<RefCell<HashMap<u64, Waiting<'js>>>>;

/// Hands one binding call to the run's call table: the promise of its reply, else the message
/// the call rejects with.
fn submit<'js>(
    ctx: &Ctx<'js>,
    state: &RefCell<State>,
    watch: &Watch,
    waiters: &Waiters<'js>,
    binding: f64,
    args: Option<serde_json::Value>,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    let (promise, resolve, reject) = ctx.promise()?;
    let mut s = state.borrow_mut();
    if s.ending.is_some() {
        return refusal(ctx, "run_code run is over");
    }
    let binding = if binding >= 0.0 && binding.fract() == 0.0 {
        binding as usize
    } else {
        usize::MAX
    };
    match s.calls.submit(Target::Numbered(binding), args) {
        Submitted::Dispatched(id) => {
            waiters.borrow_mut().insert(
                id,
                Waiting {
                    resolve,
                    reject,
                    binding,
                },
            );
            Ok(promise.into_value())
        }
        Submitted::Limit(ending) => {
            let message = match &ending {
                Ending::Fail(_, message) => message.clone(),
                Ending::Done(_) | Ending::Overflow(_) => String::new(),
            };
            s.end(watch, ending);
            refusal(ctx, &message)
        }
    }
}

fn refusal<'js>(ctx: &Ctx<'js>, message: &str) -> rquickjs::Result<rquickjs::Value<'js>> {
    Ok(rquickjs::String::from_str(ctx.clone(), message)?.into_value())
}

/// Runs `job` to its outcome, sends the outcome, then tears the interpreter down.
pub(crate) fn run(job: Job, tx: oneshot::Sender<RunOutcome>) {
    execute(job, |ending, ledger, logs| {
        let _ = tx.send(driver::outcome(ledger, logs, ending));
    });
}

/// Compiles the bootstrap ahead of the first run (a worker does it before it is needed).
#[cfg(feature = "python")]
pub(crate) fn prepare() {
    std::sync::LazyLock::force(&BOOTSTRAP_BYTECODE);
}

/// Runs `job` to its ending and hands that to `ended` with the run's ledger and logs, then tears
/// the interpreter down (the caller hears of the ending first).
pub(crate) fn execute(mut job: Job, ended: impl FnOnce(Ending, &mut OutputLedger, Vec<String>)) {
    let _tokio = job.handle.enter();
    let lane = job.lane.take();
    let watch = Arc::new(Watch::new(&job));
    let cap = usize::try_from(job.config.budgets.max_memory_mb << 20)
        .unwrap_or(usize::MAX)
        .saturating_add(BASE_HEAP_BYTES);
    let allocator = Budgeted {
        used: 0,
        cap,
        watch: Arc::clone(&watch),
    };
    let state = Rc::new(RefCell::new(State {
        ledger: OutputLedger::new(job.config.budgets.max_output_bytes),
        logs: Vec::new(),
        ending: None,
        calls: Calls::new(&job, lane),
        relay: job.relay.take(),
    }));
    let started = Runtime::new_with_alloc(allocator).and_then(|rt| {
        rt.set_max_stack_size(INTERPRETER_STACK_BYTES);
        let hook = Arc::clone(&watch);
        rt.set_interrupt_handler(Some(Box::new(move || hook.check())));
        let context = Context::full(&rt)?;
        Ok((rt, context))
    });
    let (rt, context) = match started {
        Ok(pair) => pair,
        Err(e) => {
            let mut state = state.borrow_mut();
            let ending = match watch.stopped() {
                Some(stop) if stop != Stop::Settled => watch.failure(stop),
                _ => Ending::Fail(
                    FailureKind::WorkerExit,
                    format!("the interpreter could not start: {e}"),
                ),
            };
            let logs = std::mem::take(&mut state.logs);
            ended(ending, &mut state.ledger, logs);
            return;
        }
    };
    let ending = context.with(|ctx| drive(&ctx, &job, &watch, &state));
    {
        let mut state = state.borrow_mut();
        let logs = std::mem::take(&mut state.logs);
        ended(ending, &mut state.ledger, logs);
    }
    // The program's heap goes with the runtime; pending calls were dropped at settle.
    drop(context);
    drop(rt);
}

fn drive(ctx: &Ctx<'_>, job: &Job, watch: &Arc<Watch>, state: &Rc<RefCell<State>>) -> Ending {
    let waiters = Waiters::default();
    let failure = match start(ctx, job, watch, state, &waiters) {
        Ok(failure) => Some(failure),
        Err(e) => {
            let _ = ctx.catch();
            if watch.stopped().is_none() {
                state.borrow_mut().end(
                    watch,
                    Ending::Fail(
                        FailureKind::WorkerExit,
                        format!("the interpreter could not start the program: {e}"),
                    ),
                );
            }
            None
        }
    };
    if let Some(failure) = failure {
        pump(ctx, job, watch, state, &waiters, &failure);
    }
    waiters.borrow_mut().clear();
    let mut state = state.borrow_mut();
    state.calls.settle();
    match watch.stopped() {
        Some(Stop::Settled) | None => state
            .ending
            .take()
            .unwrap_or_else(|| watch.failure(Stop::Settled)),
        Some(stop) => watch.failure(stop),
    }
}

/// Installs the host functions and the bootstrap, compiles the program and starts it. Returns
/// the bootstrap's `failure` function (the error a failed call rejects with).
fn start<'js>(
    ctx: &Ctx<'js>,
    job: &Job,
    watch: &Arc<Watch>,
    state: &Rc<RefCell<State>>,
    waiters: &Waiters<'js>,
) -> rquickjs::Result<Function<'js>> {
    let host = Object::new(ctx.clone())?;
    let (st, w) = (Rc::clone(state), Arc::clone(watch));
    host.set(
        "log",
        Function::new(ctx.clone(), move |text: String| {
            let mut guard = st.borrow_mut();
            let s = &mut *guard;
            if s.ending.is_some() {
                return;
            }
            if let Some(relay) = &mut s.relay {
                relay.log(&text);
            }
            if let Err(diagnostic) = s.ledger.push_log(&mut s.logs, &text) {
                s.end(&w, Ending::Overflow(diagnostic));
            }
            // Sent already: the host keeps the logs, the ledger here only counts them.
            if s.relay.is_some() {
                s.logs.clear();
            }
        })?,
    )?;
    let reader = Reader::new(ctx, job.config.budgets.max_output_bytes)?;
    let (st, w, calls) = (Rc::clone(state), Arc::clone(watch), Rc::clone(waiters));
    host.set(
        "call",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, binding: f64, args: rquickjs::Value<'js>| {
                let args = match reader.read(&ctx, args) {
                    Read::Data(value) => Some(value),
                    Read::Unfit => {
                        return refusal(&ctx, "binding arguments must be lossless JSON");
                    }
                    Read::Encode => return Ok(rquickjs::Value::new_null(ctx)),
                };
                submit(&ctx, &st, &w, &calls, binding, args)
            },
        )?,
    )?;
    let (st, w, calls) = (Rc::clone(state), Arc::clone(watch), Rc::clone(waiters));
    host.set(
        "callJson",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, binding: f64, args: String| {
                submit(&ctx, &st, &w, &calls, binding, parse_json(&args))
            },
        )?,
    )?;
    let (st, w) = (Rc::clone(state), Arc::clone(watch));
    host.set(
        "done",
        Function::new(ctx.clone(), move |text: Opt<String>| {
            let ending = match text.0 {
                None => Ending::Done(None),
                // Kept as text, checked and rewritten in one streaming pass: never a tree.
                Some(text) => match canonical(text.as_bytes()) {
                    Ok(value) => Ending::Done(Some(value)),
                    Err(_) => Ending::Fail(
                        FailureKind::InvalidOutput,
                        "program completion must be lossless JSON".to_owned(),
                    ),
                },
            };
            st.borrow_mut().end(&w, ending);
        })?,
    )?;
    let (st, w) = (Rc::clone(state), Arc::clone(watch));
    host.set(
        "fail",
        Function::new(ctx.clone(), move |kind: i32, message: String| {
            // Only program-level kinds come from the program's side; limits are the host's.
            let kind = if kind == 1 {
                FailureKind::InvalidOutput
            } else {
                FailureKind::Exception
            };
            st.borrow_mut().end(&w, Ending::Fail(kind, message));
        })?,
    )?;
    let factory = bootstrap(ctx)?;
    let api: Object = factory.call((host,))?;
    let prepare: Function = api.get("prepare")?;
    let failure: Function = api.get("failure")?;
    let namespaces =
        serde_json::Value::Array(job.request.bindings.iter().map(bootstrap_form).collect());
    let prepared: Object = prepare.call((
        namespaces.to_string(),
        job.config.budgets.max_output_bytes as f64,
        MAX_FRAME_DEPTH as f64,
    ))?;
    let head: String = prepared.get("head")?;
    let begin: Function = prepared.get("start")?;
    let reject: Function = prepared.get("reject")?;
    // The program keeps its own lines, and the bootstrap takes the head's width off first-line
    // columns, so stack positions are the program's own.
    let source = format!("{head}{}\n}})", job.program);
    let mut options = EvalOptions::default();
    options.filename = Some("program.ts".to_owned());
    match ctx.eval_with_options::<Function, _>(source, options) {
        Ok(main) => begin.call::<_, ()>((main,))?,
        Err(rquickjs::Error::Exception) => {
            let thrown = ctx.catch();
            reject.call::<_, ()>((thrown,))?;
        }
        Err(e) => return Err(e),
    }
    Ok(failure)
}

/// Runs interpreter jobs and binding replies until the run has ended or been stopped.
fn pump<'js>(
    ctx: &Ctx<'js>,
    job: &Job,
    watch: &Arc<Watch>,
    state: &Rc<RefCell<State>>,
    waiters: &Waiters<'js>,
    failure: &Function<'js>,
) {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut aborted = pin!(job.request.signal.clone().cancelled_owned());
    let mut disposed = pin!(job.disposed.clone().cancelled_owned());
    let mut ready = Vec::new();
    loop {
        while watch.stopped().is_none() && ctx.execute_pending_job() {}
        if watch.stopped().is_some() {
            return;
        }
        state
            .borrow_mut()
            .calls
            .poll_ready(&mut cx, watch, &mut ready);
        if !ready.is_empty() {
            for (id, result) in ready.drain(..) {
                if watch.stopped().is_some() {
                    return;
                }
                let Some(waiting) = waiters.borrow_mut().remove(&id) else {
                    continue;
                };
                let replied = match result {
                    Ok((value, depth)) => {
                        let built = values::write(ctx, &value);
                        frame::with_stack_for(depth, move || drop(value));
                        match built {
                            Ok(value) => waiting.resolve.call::<_, ()>((value,)),
                            Err(_) => {
                                let _ = ctx.catch();
                                reject(
                                    ctx,
                                    failure,
                                    &waiting,
                                    "binding resolution could not be read".to_owned(),
                                    None,
                                )
                            }
                        }
                    }
                    Err(error) => reject(ctx, failure, &waiting, error.message, error.code),
                };
                if replied.is_err() {
                    let _ = ctx.catch();
                }
            }
            if watch.stopped().is_some() {
                return;
            }
            continue;
        }
        if aborted.as_mut().poll(&mut cx).is_ready() {
            watch.raise(Stop::Aborted);
        }
        if disposed.as_mut().poll(&mut cx).is_ready() {
            watch.raise(Stop::Disposed);
        }
        if watch.check() {
            return;
        }
        // No job is queued and no call is in flight: nothing can ever settle what the program
        // awaits.
        if waiters.borrow().is_empty() {
            state.borrow_mut().end(
                watch,
                Ending::Fail(FailureKind::Exception, STUCK.to_owned()),
            );
            return;
        }
        let mut s = state.borrow_mut();
        match &mut s.relay {
            Some(relay) => relay.wait(),
            None => {
                drop(s);
                std::thread::park_timeout(watch.wall_left());
            }
        }
    }
}

/// Rejects a waiting call with the error its namespace raises for `message` and `code`.
fn reject<'js>(
    ctx: &Ctx<'js>,
    failure: &Function<'js>,
    waiting: &Waiting<'js>,
    message: String,
    code: Option<String>,
) -> rquickjs::Result<()> {
    let error = match failure.call::<_, rquickjs::Value>((waiting.binding as f64, message, code)) {
        Ok(error) => error,
        // The program broke what the error is built with (a throwing setter on
        // `Error.prototype`, …): the call still settles, rejecting with what that threw.
        Err(_) => ctx.catch(),
    };
    waiting.reject.call((error,))
}
