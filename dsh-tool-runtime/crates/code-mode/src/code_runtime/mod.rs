//! Code runtimes: run a model-written program in a fresh child process per run, or (features
//! `embedded-js`, `embedded-python`, crate `dsh-tool-engines`) in a fresh embedded interpreter.
//!
//! A [`CodeRuntime`] takes a [`RunRequest`] (the program text, the binding namespaces it may call
//! and a cancellation signal) and always resolves with a [`RunOutcome`]: the program's logs plus
//! either its completion value or a typed [`CodeRunFailure`]. It returns a [`CodeRuntimeError`]
//! only for misuse (a run after [`CodeRuntime::dispose`], binding namespaces that break the
//! portable identifier rules).
//!
//! [`SubprocessRuntime`] is the implementation: TypeScript runs in Node.js (types stripped on the
//! host with oxc), Python in CPython; each run gets a process no other program has touched, in its
//! own process group, with an empty environment and a fresh temporary working directory, under
//! the budgets of [`SubprocessConfig`]. `EmbeddedRuntime` (in `dsh-tool-engines`, which builds
//! on the hidden `kit`) runs TypeScript on QuickJS and Python on Monty with no ambient
//! authority, in pooled sandboxed worker processes (QuickJS also on a thread of the host, for
//! trusted programs), under the same budgets (`EmbeddedConfig`). The
//! contract follows the DSH code-runtime service; where it differs, the differences are documented
//! on the item.

mod admission;
mod budget;
mod calls;
mod ending;
mod journal;
mod ledger;
mod names;
mod process;
mod sandbox;
mod strip;
mod subprocess;
mod value_text;
mod watch;

pub mod frame;
#[doc(hidden)]
pub mod kit;

use std::fmt;
use std::sync::Arc;

use dsh_sdk_templates::{BINDING_ERROR, FAILURE_TEXT, LOSSLESS_JSON};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use budget::Budgets;
pub(crate) use journal::{Admission, CallFuture, RunJournal};
// In the hidden `durable::steps` API of runs on Restate.
#[doc(hidden)]
pub use journal::{MakeCall, ParkSlot};
pub use ledger::OutputLedger;
pub use names::validate_namespaces;
pub use sandbox::{Sandbox, SandboxStatus};
pub use subprocess::{SubprocessConfig, SubprocessRuntime};
pub use value_text::JsonText;

/// A JavaScript bootstrap with the shared pieces put where it says
/// `/* @include lossless_json.js */`, `/* @include binding_error.js */` and
/// `/* @include failure_text.js */`.
pub fn javascript_bootstrap(template: &str) -> String {
    template
        .replacen("/* @include lossless_json.js */", LOSSLESS_JSON, 1)
        .replacen("/* @include binding_error.js */", BINDING_ERROR, 1)
        .replacen("/* @include failure_text.js */", FAILURE_TEXT, 1)
}

/// A code runtime: runs one program per [`run`](CodeRuntime::run) call, never sharing state
/// between runs.
///
/// The trait is object safe, so a registry can hold an `Arc<dyn CodeRuntime>`.
pub trait CodeRuntime: Send + Sync {
    /// The lowercase language id of the programs this runtime accepts: `"typescript"` or
    /// `"python"`.
    fn language(&self) -> &'static str;

    /// How programs are isolated from the host.
    fn isolation(&self) -> Isolation;

    /// What a program must know about this runtime that the language's SDK guide does not say
    /// (an interpreter that implements a subset of the language): shown to the model as its own
    /// prompt section, `tools:runtime`, after the SDK. `None` (the default) adds nothing.
    fn prompt_note(&self) -> Option<&'static str> {
        None
    }

    /// The budgets every run gets, recorded on the `run_code` span (see
    /// [`telemetry`](crate::telemetry)). `None` (the default): not known.
    fn budgets(&self) -> Option<&Budgets> {
        None
    }

    /// Runs one program to completion.
    ///
    /// Every program outcome (value, thrown error, budget hit, crash, cancellation) resolves as
    /// `Ok(RunOutcome)`. Errors: [`CodeRuntimeError::Disposed`] after
    /// [`dispose`](CodeRuntime::dispose), [`CodeRuntimeError::InvalidBindings`] when the
    /// namespaces break the rules of [`validate_namespaces`]. Nothing is spawned in either case.
    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunOutcome, CodeRuntimeError>>;

    /// Stops the runtime: live runs settle as [`FailureKind::Abort`] (`runtime disposed`), their
    /// children and any standby child are killed and awaited before the future resolves. Later
    /// runs fail with [`CodeRuntimeError::Disposed`]. Calling it twice is harmless.
    fn dispose(&self) -> BoxFuture<'_, ()>;
}

/// The isolation label of a runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Isolation {
    /// A thread inside the host process.
    WorkerThread,
    /// A separate OS process per run.
    Process,
    /// A separate OS process per run, confined by the OS sandbox ([`Sandbox`]).
    SandboxedProcess,
    /// A container per run.
    Container,
    /// An interpreter inside the host process, with no ambient authority.
    #[serde(rename = "in-process interpreter")]
    InProcessInterpreter,
}

impl Isolation {
    /// The wire name: `worker-thread`, `process`, `sandboxed-process`, `container` or
    /// `in-process interpreter`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::WorkerThread => "worker-thread",
            Isolation::Process => "process",
            Isolation::SandboxedProcess => "sandboxed-process",
            Isolation::Container => "container",
            Isolation::InProcessInterpreter => "in-process interpreter",
        }
    }
}

/// The error class a namespace's failed calls are raised as inside the program.
///
/// For the tool bridge this is `ToolCallError` with member `toolName`: a failed call rejects with
/// an instance whose `message` is the failure text and whose `toolName` is the binding's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    /// The class name bound in the program, e.g. `ToolCallError`. A portable identifier.
    pub name: String,
    /// The property (attribute in Python) carrying the binding name, e.g. `toolName`.
    pub member_name_property: String,
}

/// One global the program sees, holding callable bindings.
///
/// In TypeScript `tools.search(args)` and `tools["my-tool"](args)`; in Python
/// `await tools.search(args)` and `await tools["my-tool"](args)`. Binding names are arbitrary
/// strings and are looked up as own names only, so `constructor` or `__proto__` never reach
/// anything but a binding of that exact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingNamespace {
    /// The global's name, e.g. `tools`. A portable identifier ([`validate_namespaces`]).
    pub global: String,
    /// The callable names; duplicates are ignored.
    pub names: Vec<String>,
    /// The class failed calls raise; without one they raise a plain `Error` / `Exception`.
    pub error_class: Option<ErrorClass>,
}

impl BindingNamespace {
    /// The namespace as the bootstraps read it: `{global, names, errorClass: {name, member}?}`.
    pub(crate) fn bootstrap_form(&self) -> Value {
        serde_json::json!({
            "global": self.global,
            "names": self.names,
            "errorClass": self.error_class.as_ref().map(|class| serde_json::json!({
                "name": class.name,
                "member": class.member_name_property,
            })),
        })
    }

    /// The tool namespace of code mode: global `tools`, error class `ToolCallError` with member
    /// `toolName`.
    pub fn tools(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        BindingNamespace {
            global: "tools".to_owned(),
            names: names.into_iter().map(Into::into).collect(),
            error_class: Some(ErrorClass {
                name: "ToolCallError".to_owned(),
                member_name_property: "toolName".to_owned(),
            }),
        }
    }
}

/// One call a program made to a binding, handed to the [`BindingDispatch`]. A runtime of
/// one's own builds it with [`BindingCall::new`].
#[derive(Debug, Clone)]
pub struct BindingCall {
    /// The namespace's global, e.g. `tools`.
    pub namespace: String,
    /// The binding name, exactly as declared in [`BindingNamespace::names`].
    pub name: String,
    /// The arguments: lossless JSON (no `-0`), at most [`frame::MAX_DEPTH`] levels deep.
    pub args: Value,
    /// Cancelled when the run settles; a dispatcher should stop work it started for the call.
    pub signal: CancellationToken,
    /// In a durable run: where the call's pre-execute `Ask` parks the run.
    pub(crate) park: Option<ParkSlot>,
}

impl BindingCall {
    /// The call of `namespace.name` with `args`, stopped by `signal`.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        args: Value,
        signal: CancellationToken,
    ) -> Self {
        BindingCall {
            namespace: namespace.into(),
            name: name.into(),
            args,
            signal,
            park: None,
        }
    }
}

/// A binding call's failure; the program sees `message` and `code` on the namespace's error
/// class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingError {
    /// The text the program reads as the error's `message`.
    pub message: String,
    /// The code the program reads as the error's `code` (`null` / `None` without one): for tool
    /// calls the [`ErrorCode`](crate::ErrorCode) wire string or the author's own code.
    pub code: Option<String>,
}

impl BindingError {
    /// A failure with this message and no code.
    pub fn new(message: impl Into<String>) -> Self {
        BindingError {
            message: message.into(),
            code: None,
        }
    }

    /// The same failure carrying `code`.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BindingError {}

/// The host callback that serves binding calls. Calls of one run may overlap (a program using
/// `Promise.all` or `asyncio.gather`); the result must be lossless JSON (no `-0`), else the call
/// rejects in the program with `binding resolution must be lossless JSON`.
pub type BindingDispatch =
    Arc<dyn Fn(BindingCall) -> BoxFuture<'static, Result<Value, BindingError>> + Send + Sync>;

/// What to run: the program and what it may call. Budgets are runtime configuration
/// ([`SubprocessConfig`]), never part of a request.
#[derive(Clone)]
pub struct RunRequest {
    /// The program: the body of an async function in the runtime's language. Top-level `await`
    /// and `return` work; the returned value is the run's value.
    pub program: String,
    /// The globals the program sees besides `console` (TypeScript) / `print` (Python).
    pub bindings: Vec<BindingNamespace>,
    /// Serves the bindings' calls. Without one every call rejects with
    /// `no binding dispatcher installed`.
    pub dispatch: Option<BindingDispatch>,
    /// Cancelling it settles the run as [`FailureKind::Abort`]; a signal cancelled before the run
    /// starts spawns nothing.
    pub signal: CancellationToken,
    /// The scheduler behind `dispatch`, for a runtime that drives it itself (set by `run_code`).
    pub(crate) lane: Option<Lane>,
    /// The journal of a durable run (set by `run_code`): the session answers and records the
    /// run's binding calls through it.
    pub(crate) journal: Option<Arc<dyn RunJournal>>,
}

/// The scheduler of one run's binding calls (the code-mode bridge's lane), offered to a runtime
/// that polls those calls on a thread of its own: driven there, a call needs no wake-up of a
/// tokio worker. Whoever takes it first drives it: the runtime, or else `run_code` itself.
#[derive(Clone)]
pub struct Lane {
    take: Arc<dyn Fn() -> Option<BoxFuture<'static, ()>> + Send + Sync>,
    stop: CancellationToken,
}

impl fmt::Debug for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lane")
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

impl Lane {
    /// A lane whose scheduler `take` hands out once (later calls: `None`); it ends once `stop`
    /// is cancelled and its started calls have committed.
    pub(crate) fn new(
        stop: CancellationToken,
        take: impl Fn() -> Option<BoxFuture<'static, ()>> + Send + Sync + 'static,
    ) -> Self {
        Lane {
            take: Arc::new(take),
            stop,
        }
    }

    /// The scheduler, unless someone took it already. The taker must poll it (in the tokio
    /// runtime's context) and, once the run has settled, cancel [`stop`](Lane::stop) and poll
    /// it to its end before answering: only then have the run's started calls committed. One
    /// that cannot must hand it to a task, never drop it.
    pub fn take(&self) -> Option<BoxFuture<'static, ()>> {
        (self.take)()
    }

    /// What stops the scheduler: the run's own signal.
    pub fn stop(&self) -> &CancellationToken {
        &self.stop
    }
}

impl RunRequest {
    /// A request for `program` with no bindings and a fresh, uncancelled signal.
    pub fn new(program: impl Into<String>) -> Self {
        RunRequest {
            program: program.into(),
            bindings: Vec::new(),
            dispatch: None,
            signal: CancellationToken::new(),
            lane: None,
            journal: None,
        }
    }

    /// Journals the run's binding calls in `journal`.
    pub(crate) fn journal(mut self, journal: Arc<dyn RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Offers the scheduler behind `dispatch` to the runtime.
    pub(crate) fn lane(mut self, lane: Lane) -> Self {
        self.lane = Some(lane);
        self
    }

    /// Adds a namespace.
    pub fn binding(mut self, namespace: BindingNamespace) -> Self {
        self.bindings.push(namespace);
        self
    }

    /// Sets the callback serving binding calls.
    pub fn dispatch(mut self, dispatch: BindingDispatch) -> Self {
        self.dispatch = Some(dispatch);
        self
    }

    /// Sets the cancellation signal.
    pub fn signal(mut self, signal: CancellationToken) -> Self {
        self.signal = signal;
        self
    }
}

impl fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunRequest")
            .field("program", &self.program)
            .field("bindings", &self.bindings)
            .field("dispatch", &self.dispatch.as_ref().map(|_| "<fn>"))
            .field("signal", &self.signal)
            .finish()
    }
}

/// The result of one run.
///
/// Exactly one of `value` and `error` describes the ending: `error` set means the run failed;
/// otherwise `value` is the returned JSON value as compact JSON text ([`JsonText`]; decode it
/// with [`JsonText::to_value`]), `None` when the program returned nothing
/// (`undefined` / `None`). `logs` holds the program's output in arrival order: one entry per
/// `console.*` call or `process.stdout.write` (TypeScript), per printed line (Python), and per
/// line written to the process's stdout or stderr by any other means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The returned value when the run succeeded, as compact JSON text: up to the output budget
    /// (`max_output_bytes`, less the logs), held in about its bytes of host memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<JsonText>,
    /// Output entries, oldest first.
    pub logs: Vec<String>,
    /// Why the run failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CodeRunFailure>,
    /// The sandbox the run's child had, when a child was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxStatus>,
}

/// A typed run failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeRunFailure {
    /// The class of failure.
    pub kind: FailureKind,
    /// Human-readable detail; for [`FailureKind::Exception`] the error's stack or message.
    pub message: String,
}

/// The failure classes of a run. Limit kinds are decided by the host alone: a program that
/// prints or raises a limit message gets [`FailureKind::Exception`] (or nothing), never a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The program raised, failed to parse or type-strip, or awaits what nothing can settle
    /// (no call in flight, no timer, no I/O: it could never go on).
    Exception,
    /// The compute (CPU) budget or the wall-clock ceiling ran out; the message says which.
    Timeout,
    /// The request's signal was cancelled or the runtime was disposed.
    Abort,
    /// The child died or closed its protocol channel before completing (killed, aborted,
    /// exited).
    WorkerExit,
    /// The program completed with a value that is not lossless JSON.
    InvalidOutput,
    /// Logs plus value or failure message exceeded `max_output_bytes`.
    OutputLimit,
    /// The program made more than `max_binding_calls` binding calls (beyond DSH).
    BindingLimit,
    /// The run's processes held more resident memory than `max_memory_mb` (beyond DSH). Only
    /// the host's own measurement decides it: a program raising an out-of-memory error or
    /// aborting gets [`FailureKind::Exception`] or [`FailureKind::WorkerExit`].
    MemoryLimit,
    /// A resumed durable run made a call other than the journaled one at its place (another
    /// tool or other arguments), or ended before making every journaled call; the message
    /// names both calls. Nothing after the divergence ran.
    ReplayDiverged,
    /// A durable run's journaled calls would hold more than the run's bound of bytes
    /// ([`DurableRun::with_max_run_bytes`](crate::durable::DurableRun::with_max_run_bytes)):
    /// a call whose arguments do not fit is not made, a call whose outcome does not fit is not
    /// recorded (its outcome stays unknown). The message names the call and the bound.
    JournalLimit,
}

impl FailureKind {
    /// The wire name, e.g. `worker-exit`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Exception => "exception",
            FailureKind::Timeout => "timeout",
            FailureKind::Abort => "abort",
            FailureKind::WorkerExit => "worker-exit",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::OutputLimit => "output-limit",
            FailureKind::BindingLimit => "binding-limit",
            FailureKind::MemoryLimit => "memory-limit",
            FailureKind::ReplayDiverged => "replay-diverged",
            FailureKind::JournalLimit => "journal-limit",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Misuse of a runtime, or a runtime that cannot be built. Program outcomes are never errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeRuntimeError {
    /// [`CodeRuntime::run`] after [`CodeRuntime::dispose`].
    #[error("dsh-code-runtime: run() after disposal")]
    Disposed,
    /// The binding namespaces break a rule of [`validate_namespaces`]; the text names it.
    #[error("dsh-code-runtime: {0}")]
    InvalidBindings(String),
    /// A [`SubprocessConfig`] field is out of range; the text names the field.
    #[error("dsh-code-runtime: {0}")]
    InvalidConfig(String),
    /// The interpreter binary (or Monty's worker program) was not found.
    #[error(
        "dsh-code-runtime: the {language} runtime needs `{binary}`, which was not found; {fix}"
    )]
    InterpreterNotFound {
        /// `typescript` or `python`.
        language: &'static str,
        /// The binary looked for, e.g. `node`.
        binary: String,
        /// How to provide it, e.g. "install it or set `SubprocessConfig::interpreter` to its path".
        fix: &'static str,
    },
    /// The interpreter runs but is older than supported, or did not report a version.
    #[error(
        "dsh-code-runtime: `{binary}` reports version {found:?} but the {language} runtime needs \
         {minimum} or newer; set `SubprocessConfig::interpreter` to a newer binary"
    )]
    InterpreterTooOld {
        /// `typescript` or `python`.
        language: &'static str,
        /// The binary that was run.
        binary: String,
        /// What it printed for its version (trimmed).
        found: String,
        /// The oldest supported version, e.g. `18` (Node.js) or `3.10` (CPython).
        minimum: &'static str,
    },
    /// [`Sandbox::Enforce`] on a kernel that cannot give all of the sandbox; the text names
    /// what is missing.
    #[error("dsh-code-runtime: the sandbox cannot be enforced on this kernel: {0} missing")]
    SandboxUnavailable(String),
    /// The interpreter could not be started to check its version.
    #[error(
        "dsh-code-runtime: could not run `{binary}` for the {language} runtime: {reason}; \
         set `SubprocessConfig::interpreter` to a working binary"
    )]
    InterpreterUnusable {
        /// `typescript` or `python`.
        language: &'static str,
        /// The binary that was run.
        binary: String,
        /// The OS error.
        reason: String,
    },
}

/// The code runtime `run_code` is bound to, kept in the registry state's extensions (here, below
/// code mode and durable runs, which both read it).
#[derive(Clone)]
pub(crate) struct Mounted(pub(crate) Arc<dyn CodeRuntime>);

/// The code runtime mounted in `state`.
pub(crate) fn mounted(state: &crate::registry::State) -> Option<Arc<dyn CodeRuntime>> {
    state
        .extensions
        .get::<Mounted>()
        .map(|mounted| Arc::clone(&mounted.0))
}
