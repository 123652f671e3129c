//! The worker process of the Python runtime on Monty ([`EmbeddedRuntime::python`]): runs one
//! after another, each in a fresh Monty interpreter (nothing but the heap's allocator outlives
//! a run), speaking the subprocess runtimes' frame protocol (`print` output as `log` frames, so that it
//! is ordered with the calls and belongs to its run) over two rings in memory shared with the
//! host (fd 5; fds 3 and 4 are the doorbells, see `ring.rs`). Both directions are buffered;
//! the interpreter thread reads and writes them itself, with no thread in between.
//!
//! The program cannot reach anything but the bindings: Monty has no filesystem, network,
//! environment or process access of its own, and every OS call it would delegate is refused
//! here. The host trusts nothing this process says: it polls CPU and memory, enforces the
//! wall-clock ceiling, counts binding calls and output, and kills the process when a run ends
//! any other way than by completing. The one thing this side decides is the allocator's hard
//! limit, reported only through the exit status [`monty_types::OOM_EXIT_CODE`], which no
//! program can choose.
//!
//! The interpreter loop ([`execute`]) is generic over its [`Link`], so that the in-process
//! variant the benchmarks measure runs the same code. The same process serves QuickJS instead
//! when started with `quickjs` (`quickjs_worker.rs`), over the same channel.
//!
//! [`EmbeddedRuntime::python`]: super::super::EmbeddedRuntime::python

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, DictPairs, ExcType, ExtFunctionResult, LIVE_MEMORY, MontyException,
    MontyObject, NameLookupResult, OOM_EXIT_CODE, PrintWriter, PrintWriterCallback, ResourceLimits,
    ResourceTracker,
};
use serde_json::Value;

use super::super::worker_pool::ring;
use crate::json::MAX_FRAME_DEPTH;

/// The file name the host gives the program in tracebacks.
const SCRIPT: &str = "program.py";

/// The external function every binding call goes through.
const CALL: &str = "_dsh_call";

/// Stack of the interpreter thread: Monty's recursion limit (1,000 frames) and the conversion
/// of values up to [`MAX_FRAME_DEPTH`] levels fit well inside it.
const STACK_BYTES: usize = 64 << 20;

/// Largest integer that crosses the protocol exactly (JavaScript's safe integers).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Heap bytes the worker may hold (set once from its command line; `usize::MAX` until then).
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The most heap bytes held since the last run ended.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The worker's global allocator: the system allocator, counting live bytes into
/// [`monty_types::LIVE_MEMORY`] and ending the process with [`OOM_EXIT_CODE`] at the first
/// allocation past the memory budget (the host reads that status as `memory-limit`).
#[doc(hidden)]
pub struct WorkerAllocator;

impl WorkerAllocator {
    fn reserve(size: usize) {
        let after = LIVE_MEMORY
            .fetch_add(size, Ordering::Relaxed)
            .saturating_add(size);
        if after > LIMIT.load(Ordering::Relaxed) {
            // Raw `_exit`: `std::process::exit` runs exit handlers that may allocate, and
            // rustix offers `_exit` only in its unstable runtime API. SAFETY: `_exit` ends the
            // process at once; nothing runs after it.
            unsafe { libc::_exit(OOM_EXIT_CODE) }
        }
        if after > PEAK.load(Ordering::Relaxed) {
            PEAK.store(after, Ordering::Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's layout; the counters are atomics.
unsafe impl GlobalAlloc for WorkerAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::reserve(layout.size());
        // SAFETY: forwarded with the caller's (non-zero-sized) layout.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::reserve(layout.size());
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            Self::reserve(new_size - layout.size());
        }
        // SAFETY: `ptr` came from this allocator with `layout`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > layout.size() {
                LIVE_MEMORY.fetch_sub(new_size - layout.size(), Ordering::Relaxed);
            }
        } else if new_size < layout.size() {
            LIVE_MEMORY.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        p
    }
}

/// The worker's entry point: `<worker> <max-memory-bytes> [quickjs] <bootstrap>`. Serves run
/// frames one after another, each in a fresh interpreter (Monty, or QuickJS with `quickjs`),
/// until the host closes its end. Never returns.
#[doc(hidden)]
pub fn worker_main() -> ! {
    let limit = std::env::args()
        .nth(1)
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(512 << 20);
    // The worker's own start-up is charged as well: the budget covers the whole heap.
    LIMIT.store(limit, Ordering::Relaxed);
    let quickjs =
        std::env::args().nth(2).as_deref() == Some(super::super::quickjs::worker::ENGINE_ARG);
    let code = std::thread::Builder::new()
        .name("dsh-monty".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let channel = match open_channel() {
                Ok(channel) => channel,
                Err(code) => return code,
            };
            if quickjs {
                super::super::quickjs::worker::serve(channel)
            } else {
                serve(channel)
            }
        })
        .ok()
        .and_then(|t| t.join().ok())
        .unwrap_or(70);
    std::process::exit(code)
}

/// Heap a run may leave behind before the worker gives freed memory back to the system: the
/// host reads the worker's resident size against the next run's budget.
const TRIM_ABOVE: usize = 32 << 20;

/// The largest frame buffer kept between runs.
const KEEP_BUFFER: usize = 1 << 20;

/// The frame channel to the host, from the descriptors it gives every worker; `Err` with the
/// exit code when the shared region cannot be mapped.
pub(crate) fn open_channel() -> Result<Channel, i32> {
    // SAFETY: the host gives every worker exactly these three descriptors (see `process.rs`
    // and `ring.rs`); nothing else in this process owns them.
    let (bell_out, bell_in, region) = unsafe {
        (
            File::from_raw_fd(3),
            File::from_raw_fd(4),
            OwnedFd::from_raw_fd(ring::REGION_FD),
        )
    };
    let Ok(region) = ring::Region::map(region.as_fd()) else {
        return Err(74);
    };
    let (up, down) = region.worker_ends();
    let bells = Arc::new(Bells {
        out: bell_out,
        inbox: bell_in,
    });
    let channel = Channel {
        out: BufWriter::with_capacity(
            64 << 10,
            RingOut {
                ring: up,
                bells: Arc::clone(&bells),
                published: false,
            },
        ),
        inbox: BufReader::with_capacity(64 << 10, RingIn { ring: down, bells }),
        line: Vec::new(),
    };
    Ok(channel)
}

fn serve(mut channel: Channel) -> i32 {
    loop {
        let run = match channel.next_run() {
            Ok(run) => run,
            Err(code) => return code,
        };
        let done = execute(&run, &mut channel);
        drop(run);
        if let Finish::Done(done) = done {
            if channel.done(&done).is_err() {
                return 0;
            }
        } else {
            return 0;
        }
        release_memory();
    }
}

fn parse(line: &[u8]) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    serde::Deserialize::deserialize(&mut de).ok()
}

/// Gives the heap a large run freed back to the system, so that the worker's resident size
/// is that of an idle worker again.
pub(crate) fn release_memory() {
    if PEAK.swap(LIVE_MEMORY.load(Ordering::Relaxed), Ordering::Relaxed) > TRIM_ABOVE {
        // SAFETY: `malloc_trim` only releases free memory of the C heap.
        unsafe { libc::malloc_trim(0) };
    }
}

/// The run's way out ended it early (the host is gone, or it settled the run itself).
pub(crate) struct Halt;

/// A reply from the host to one binding call.
pub(crate) enum Reply {
    Ok(MontyObject),
    Err(String, Option<String>),
}

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
    fn replies(&mut self, out: &mut Vec<(u64, Reply)>) -> Result<(), Halt>;
    /// One line the program printed.
    fn log(&mut self, text: &str) -> Result<(), Halt>;
    /// Sends what is buffered.
    fn flush(&mut self) -> Result<(), Halt>;
}

/// The frame channel of a worker process: the shared rings, buffered both ways.
pub(crate) struct Channel {
    out: BufWriter<RingOut>,
    inbox: BufReader<RingIn>,
    line: Vec<u8>,
}

/// The doorbells: fd 3 rings the host, fd 4 is where the host rings this worker (for bytes to
/// read or for space to write, whichever it parked for).
struct Bells {
    out: File,
    inbox: File,
}

impl Bells {
    fn ring_host(&self) -> std::io::Result<()> {
        (&self.out).write_all(&[1]).map_err(|_| closed())
    }

    /// Blocks until the host rings (or goes away: `Err`), then takes every waiting ring.
    fn wait(&self) -> std::io::Result<()> {
        let mut buf = [0u8; 64];
        match (&self.inbox).read(&mut buf) {
            Ok(0) | Err(_) => Err(closed()),
            Ok(_) => Ok(()),
        }
    }
}

fn closed() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::BrokenPipe)
}

/// The ring to the host, as a `Write`: a write waits for space, a flush rings the host if it
/// parked.
struct RingOut {
    ring: ring::Producer,
    bells: Arc<Bells>,
    /// Bytes were published since the last flush. Monty flushes its print writer at checkpoints
    /// of a computing program; ringing then, with nothing new, would wake a parked host to find
    /// nothing, over and over.
    published: bool,
}

impl Write for RingOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        loop {
            let n = self.ring.write(bytes).map_err(|_| closed())?;
            if n > 0 || bytes.is_empty() {
                self.published |= n > 0;
                return Ok(n);
            }
            // Full: what is in it must reach the host before it can make room.
            self.flush()?;
            if !self.ring.park().map_err(|_| closed())? {
                self.bells.wait()?;
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // A host that parks after this looks at the ring once more before it blocks, so bytes
        // published before now need a ring only if it is parked already.
        if std::mem::take(&mut self.published) && self.ring.consumer_needs_bell() {
            self.bells.ring_host()?;
        }
        Ok(())
    }
}

/// The ring from the host, as a `Read`: waits (polling for [`REPLY_SPIN`], then parked) until
/// bytes come; end of input once the host is gone.
struct RingIn {
    ring: ring::Consumer,
    bells: Arc<Bells>,
}

impl RingIn {
    /// Waits until bytes are there: `false` when the host is gone.
    fn wait_for_bytes(&mut self) -> bool {
        let until = std::time::Instant::now() + REPLY_SPIN;
        loop {
            match self.ring.available() {
                Ok(0) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
            if std::time::Instant::now() >= until {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            match self.ring.park() {
                Ok(true) => return true,
                Ok(false) => {}
                Err(_) => return false,
            }
            if self.bells.wait().is_err() {
                return false;
            }
            match self.ring.available() {
                Ok(0) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
        }
    }
}

impl Read for RingIn {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() || !self.wait_for_bytes() {
            return Ok(0);
        }
        let n = self.ring.read(out).map_err(|_| closed())?;
        // The host may be parked with replies queued for want of space.
        if self.ring.producer_needs_bell() {
            self.bells.ring_host()?;
        }
        Ok(n)
    }
}

impl Channel {
    fn string(&mut self, s: &str) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, s).map_err(std::io::Error::other)
    }

    /// Waits for the host's next `run` frame, skipping replies to a finished run's calls;
    /// `Err` with the exit code once the host is gone (0) or sent what is not JSON.
    pub(crate) fn next_run(&mut self) -> Result<Value, i32> {
        loop {
            self.line.clear();
            match self.inbox.read_until(b'\n', &mut self.line) {
                Ok(0) | Err(_) => return Err(0),
                Ok(_) => {}
            }
            let run = parse(&self.line).ok_or(73)?;
            if self.line.capacity() > KEEP_BUFFER {
                self.line = Vec::new();
            }
            // A reply the host sent before it read the last run's completion: nothing awaits it.
            if run.get("type").and_then(Value::as_str) == Some("run") {
                return Ok(run);
            }
        }
    }

    /// Sends a run's `done` frame (given without its newline).
    pub(crate) fn done(&mut self, done: &str) -> std::io::Result<()> {
        self.out.write_all(done.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Waits until at least one line has come from the host, then hands `each` every line
    /// there is, without its newline.
    pub(crate) fn lines(&mut self, mut each: impl FnMut(&[u8])) -> Result<(), Halt> {
        // One line is waited for; the others already read are taken without waiting.
        let mut first = true;
        while first || self.inbox.buffer().contains(&b'\n') {
            first = false;
            self.line.clear();
            match self.inbox.read_until(b'\n', &mut self.line) {
                Ok(0) | Err(_) => return Err(Halt),
                Ok(_) => {}
            }
            each(&self.line);
        }
        if self.line.capacity() > KEEP_BUFFER {
            self.line = Vec::new();
        }
        Ok(())
    }
}

impl Link for Channel {
    fn call(
        &mut self,
        id: u64,
        global: &str,
        name: &str,
        args: &str,
    ) -> Result<Result<(), String>, Halt> {
        let mut write = || -> std::io::Result<()> {
            write!(self.out, r#"{{"type":"call","id":{id},"global":"#)?;
            self.string(global)?;
            self.out.write_all(br#","name":"#)?;
            self.string(name)?;
            self.out.write_all(br#","args":"#)?;
            self.out.write_all(args.as_bytes())?;
            self.out.write_all(b"}\n")?;
            self.out.flush()
        };
        write().map(Ok).map_err(|_| Halt)
    }

    fn replies(&mut self, out: &mut Vec<(u64, Reply)>) -> Result<(), Halt> {
        self.lines(|line| {
            if let Some(reply) = decode_reply(line) {
                out.push(reply);
            }
        })
    }

    fn log(&mut self, text: &str) -> Result<(), Halt> {
        let mut write = || -> std::io::Result<()> {
            self.out.write_all(br#"{"type":"log","text":"#)?;
            self.string(text)?;
            self.out.write_all(b"}\n")
        };
        write().map_err(|_| Halt)
    }

    fn flush(&mut self) -> Result<(), Halt> {
        self.out.flush().map_err(|_| Halt)
    }
}

/// How long a worker waiting for a reply polls its ring before it parks. A binding's reply
/// usually comes within microseconds; a parked reader is woken by the scheduler, which on an
/// idle machine takes tens of microseconds per wake-up (two per round trip, one on each side).
const REPLY_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The program's `print` output, cut into lines for a [`Link`]. A line longer than the
/// output cap is cut there: it cannot fit anyway, and the worker does not hold it.
struct Printer<'l, L: Link> {
    link: &'l mut L,
    line: String,
    cap: usize,
    halted: bool,
}

impl<L: Link> Printer<'_, L> {
    fn end_line(&mut self) -> Result<(), MontyException> {
        let sent = self.link.log(&self.line);
        self.line.clear();
        sent.map_err(|Halt| self.halt())
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
            self.line.push_str(head);
        }
        for part in parts {
            self.end_line()?;
            self.line.push_str(part);
        }
        if self.line.len() > self.cap {
            self.end_line()?;
        }
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        if end == '\n' {
            self.end_line()
        } else {
            self.line.push(end);
            Ok(())
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
    let cap = run["maxOutputBytes"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(64 << 20);
    let (source, body_lines) = wrap(program, namespaces);
    let mut printer = Printer {
        link,
        line: String::new(),
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
    let fail = |e: &MontyException| Finish::Done(done_error("exception", &describe(e, body_lines)));
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
    let mut replies: Vec<(u64, Reply)> = Vec::new();
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
                            Reply::Ok(value) => MontyObject::Tuple(vec![
                                MontyObject::Bool(true),
                                value,
                                MontyObject::None,
                            ]),
                            Reply::Err(message, code) => failure_tuple(message, code),
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

/// A reply frame: `{"type":"reply","id":N,"ok":true,"value":V}` or
/// `{"type":"reply","id":N,"ok":false,"message":M,"code":C?}`.
fn decode_reply(line: &[u8]) -> Option<(u64, Reply)> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let frame = <ReplyFrame as serde::Deserialize>::deserialize(&mut de).ok()?;
    let id = frame.id?.as_u64()?;
    let reply = if frame.ok?.as_bool()? {
        Reply::Ok(frame.value.unwrap_or(MontyObject::None))
    } else {
        Reply::Err(
            frame.message?.as_str()?.to_owned(),
            frame
                .code
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_owned),
        )
    };
    Some((id, reply))
}

/// The members of a reply frame that matter, the last of each name winning as in a parsed
/// object; the value is read straight into a program value, with no JSON tree in between
/// (a reply is read on every binding call).
#[derive(Default)]
struct ReplyFrame {
    id: Option<Value>,
    ok: Option<Value>,
    value: Option<MontyObject>,
    message: Option<Value>,
    code: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for ReplyFrame {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ReplyFrame;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a reply frame")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ReplyFrame, A::Error> {
                let mut frame = ReplyFrame::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "id" => frame.id = Some(map.next_value()?),
                        "ok" => frame.ok = Some(map.next_value()?),
                        "value" => frame.value = Some(map.next_value_seed(ProgramValue)?),
                        "message" => frame.message = Some(map.next_value()?),
                        "code" => frame.code = Some(map.next_value()?),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(frame)
            }
        }
        d.deserialize_map(Members)
    }
}

/// Reads JSON as the program sees it: `null` is `None`, integers that fit `i64` are ints,
/// other numbers floats, objects dicts (whose keys come once each: the host writes every reply
/// from a parsed value).
struct ProgramValue;

impl<'de> serde::de::DeserializeSeed<'de> for ProgramValue {
    type Value = MontyObject;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<MontyObject, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ProgramValue {
    type Value = MontyObject;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<MontyObject, E> {
        Ok(MontyObject::None)
    }
    fn visit_bool<E>(self, b: bool) -> Result<MontyObject, E> {
        Ok(MontyObject::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<MontyObject, E> {
        Ok(MontyObject::Int(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<MontyObject, E> {
        Ok(i64::try_from(u).map_or(MontyObject::Float(u as f64), MontyObject::Int))
    }
    fn visit_f64<E>(self, f: f64) -> Result<MontyObject, E> {
        Ok(MontyObject::Float(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<MontyObject, E> {
        Ok(MontyObject::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<MontyObject, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ProgramValue)? {
            items.push(item);
        }
        Ok(MontyObject::List(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<MontyObject, A::Error> {
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<String>()? {
            pairs.push((MontyObject::String(key), map.next_value_seed(ProgramValue)?));
        }
        Ok(MontyObject::Dict(DictPairs::from(pairs)))
    }
}

/// A reply's value as the program sees it, by the rules of [`ProgramValue`].
pub(crate) fn decode(value: &Value) -> MontyObject {
    // Reading a `Value` cannot fail: every JSON value has a program value.
    serde::de::DeserializeSeed::deserialize(ProgramValue, value).unwrap_or(MontyObject::None)
}

enum Unfit {
    Lossy,
    Deep,
}

/// Lossless JSON of a program value: `None`, booleans, integers within ±(2^53 − 1), finite
/// floats other than −0.0, strings, lists and tuples, dicts with string keys; at most
/// [`MAX_FRAME_DEPTH`] levels.
fn encode(value: &MontyObject, out: &mut String, depth: usize) -> Result<(), Unfit> {
    match value {
        MontyObject::None => out.push_str("null"),
        MontyObject::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        MontyObject::Int(i) if i.abs() <= MAX_SAFE_INTEGER => {
            let _ = write!(out, "{i}");
        }
        MontyObject::Float(f) if f.is_finite() && !(*f == 0.0 && f.is_sign_negative()) => {
            match serde_json::Number::from_f64(*f) {
                Some(n) => {
                    let _ = write!(out, "{n}");
                }
                None => return Err(Unfit::Lossy),
            }
        }
        MontyObject::String(s) => push_string(out, s),
        MontyObject::List(items) | MontyObject::Tuple(items) => {
            if depth >= MAX_FRAME_DEPTH {
                return Err(Unfit::Deep);
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(item, out, depth + 1)?;
            }
            out.push(']');
        }
        MontyObject::Dict(pairs) => {
            if depth >= MAX_FRAME_DEPTH {
                return Err(Unfit::Deep);
            }
            out.push('{');
            for (i, (key, item)) in pairs.into_iter().enumerate() {
                let MontyObject::String(key) = key else {
                    return Err(Unfit::Lossy);
                };
                if i > 0 {
                    out.push(',');
                }
                push_string(out, key);
                out.push(':');
                encode(item, out, depth + 1)?;
            }
            out.push('}');
        }
        _ => return Err(Unfit::Lossy),
    }
    Ok(())
}

fn push_string(out: &mut String, s: &str) {
    if let Ok(json) = serde_json::to_string(s) {
        out.push_str(&json);
    }
}

fn done_value(value: &MontyObject) -> String {
    if matches!(value, MontyObject::None) {
        return r#"{"type":"done"}"#.to_owned();
    }
    let mut json = String::new();
    match encode(value, &mut json, 0) {
        Ok(()) => format!(r#"{{"type":"done","value":{json}}}"#),
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
    serde_json::json!({"type": "done", "error": {"kind": kind, "message": message}}).to_string()
}

/// The exception as CPython prints it, with the program's own line numbers and without the
/// frames of the wrapper.
fn describe(e: &MontyException, body_lines: u32) -> String {
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
    match e.message() {
        Some(message) => {
            let _ = write!(out, "{}: {message}", e.exc_type());
        }
        None => {
            let _ = write!(out, "{}", e.exc_type());
        }
    }
    out
}

/// The source Monty runs: the program as the body of an async function (so that it may
/// `return` and `await`), the namespaces and error classes after it, then the call. Line `n`
/// of the program is line `n + 1` of the source. Returns the source and the program's line
/// count.
fn wrap(program: &str, namespaces: &[Value]) -> (String, u32) {
    let mut source = String::from("async def __dsh_program():\n");
    let mut lines = 0u32;
    for (line, starts_in_string) in split_lines(program) {
        lines += 1;
        if !starts_in_string && !line.trim().is_empty() {
            source.push_str("    ");
        }
        source.push_str(line);
        source.push('\n');
    }
    source.push_str("    pass\n");
    let mut classes = Vec::new();
    for ns in namespaces {
        let Some(global) = ns["global"].as_str() else {
            continue;
        };
        let names: Vec<&str> = ns["names"]
            .as_array()
            .map(|n| n.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // Monty has no class inheritance and its exceptions take one string: a failed call
        // raises `RuntimeError(message)`, and the error class is another name for it.
        if let Some(class) = ns
            .get("errorClass")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            && is_identifier(class)
            && !classes.contains(&class)
        {
            classes.push(class);
            let _ = writeln!(source, "{class} = RuntimeError");
        }
        let _ = writeln!(source, "class __dsh_ns_{global}:");
        let mut quoted = String::new();
        push_string(&mut quoted, global);
        for name in &names {
            let mut q = String::new();
            push_string(&mut q, name);
            let _ = write!(
                source,
                "    async def _dsh_b_{}(self, *given, **keywords):\n        if not given:\n            args = keywords\n        elif keywords:\n            raise RuntimeError('pass the arguments as keywords or as one dict, not both')\n        elif len(given) > 1:\n            raise TypeError('a binding takes one argument')\n        else:\n            args = given[0]\n        ok, value, code = await {CALL}({quoted}, {q}, args)\n        if ok:\n            return value\n        raise RuntimeError(value)\n",
                mangle(name),
            );
        }
        for name in &names {
            if is_identifier(name) {
                let _ = writeln!(source, "    {name} = _dsh_b_{}", mangle(name));
            }
        }
        source.push_str("    pass\n");
        let _ = writeln!(source, "{global} = __dsh_ns_{global}()");
        // Monty has no `__getitem__`: other names are attributes, reached with `getattr`.
        for name in names.iter().filter(|n| !is_identifier(n)) {
            let mut q = String::new();
            push_string(&mut q, name);
            let _ = writeln!(
                source,
                "setattr({global}, {q}, {global}._dsh_b_{})",
                mangle(name)
            );
        }
    }
    source.push_str("await __dsh_program()\n");
    (source, lines)
}

/// A name as part of an identifier: its bytes in hex, so that any binding name fits.
fn mangle(name: &str) -> String {
    name.bytes().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The program's lines, each with whether it starts inside a string literal (whose text must
/// not be indented).
fn split_lines(program: &str) -> Vec<(&str, bool)> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Code,
        Short(u8),
        Long(u8),
    }
    let mut state = State::Code;
    let mut out = Vec::new();
    for line in program.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push((line, state != State::Code));
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match state {
                State::Code => match b {
                    b'#' => break,
                    b'\'' | b'"' => {
                        if bytes.get(i + 1) == Some(&b) && bytes.get(i + 2) == Some(&b) {
                            state = State::Long(b);
                            i += 2;
                        } else {
                            state = State::Short(b);
                        }
                    }
                    _ => {}
                },
                State::Short(q) | State::Long(q) => {
                    if b == b'\\' {
                        i += 1;
                    } else if b == q {
                        if let State::Long(_) = state {
                            if bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q) {
                                state = State::Code;
                                i += 2;
                            }
                        } else {
                            state = State::Code;
                        }
                    }
                }
            }
            i += 1;
        }
        // A short string ends with its line unless the line ends in a backslash.
        if let State::Short(_) = state
            && !line.ends_with('\\')
        {
            state = State::Code;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_inside_long_strings_keep_their_text() {
        let lines = split_lines("a = '''x\n  y'''\nb = 1 # '''\nc = \"\\\n\"");
        let starts: Vec<bool> = lines.iter().map(|l| l.1).collect();
        assert_eq!(starts, [false, true, false, false, true]);
    }

    /// What the reply decoder read before it decoded replies directly: a parsed tree, then
    /// [`decode`].
    fn through_a_tree(line: &[u8]) -> Option<(u64, Reply)> {
        let frame = parse(line)?;
        let id = frame.get("id")?.as_u64()?;
        let reply = if frame.get("ok")?.as_bool()? {
            Reply::Ok(decode(frame.get("value").unwrap_or(&Value::Null)))
        } else {
            Reply::Err(
                frame.get("message")?.as_str()?.to_owned(),
                frame.get("code").and_then(Value::as_str).map(str::to_owned),
            )
        };
        Some((id, reply))
    }

    fn shown(reply: Option<(u64, Reply)>) -> String {
        match reply {
            None => "none".to_owned(),
            Some((id, Reply::Ok(value))) => format!("{id} ok {value:?}"),
            Some((id, Reply::Err(message, code))) => format!("{id} err {message:?} {code:?}"),
        }
    }

    #[test]
    fn replies_decode_as_through_a_parsed_tree() {
        let deep = "[".repeat(300) + &"]".repeat(300);
        let lines = [
            r#"{"type":"reply","id":1,"ok":true,"value":{"i":1,"s":"x\u00e9","l":[null,true,1.5]}}"#.to_owned(),
            r#"{"type":"reply","id":2,"ok":true}"#.to_owned(),
            r#"{"type":"reply","id":3,"ok":true,"value":18446744073709551615}"#.to_owned(),
            r#"{"type":"reply","id":4,"ok":true,"value":-9007199254740991}"#.to_owned(),
            r#"{"type":"reply","id":5,"ok":false,"message":"no","code":"E"}"#.to_owned(),
            r#"{"type":"reply","id":6,"ok":false,"message":"no","code":7}"#.to_owned(),
            r#"{"type":"reply","id":7,"ok":false,"code":"E"}"#.to_owned(),
            r#"{"type":"reply","id":"8","ok":true,"value":1}"#.to_owned(),
            r#"{"type":"reply","id":9,"ok":1,"value":1}"#.to_owned(),
            r#"{"id":10,"ok":true,"value":1,"id":11,"value":2,"extra":{"a":[1]}}"#.to_owned(),
            r#"{"type":"reply","id":12,"ok":true,"value":1} x"#.to_owned(),
            r#"[1,2]"#.to_owned(),
            r#"{"type":"reply","id":13,"ok":true,"value":1"#.to_owned(),
            format!(r#"{{"type":"reply","id":14,"ok":true,"value":{deep}}}"#),
        ];
        let value = |line: &str| match decode_reply(line.as_bytes()) {
            Some((_, Reply::Ok(value))) => value,
            _ => panic!("not a success reply: {line}"),
        };
        assert!(matches!(value(&lines[1]), MontyObject::None));
        assert!(matches!(value(&lines[2]), MontyObject::Float(f) if f == u64::MAX as f64));
        assert!(matches!(
            value(&lines[3]),
            MontyObject::Int(-9_007_199_254_740_991)
        ));
        assert!(matches!(value(&lines[0]), MontyObject::Dict(_)));
        for line in &lines {
            let (direct, tree) = (
                decode_reply(line.as_bytes()),
                through_a_tree(line.as_bytes()),
            );
            assert_eq!(shown(direct), shown(tree), "{line}");
        }
    }
}
