//! The type-erased tool.
//!
//! [`ToolDefinition`] is what the registry stores and dispatches: made from a typed [`Tool`](crate::Tool)
//! (`typed.rs`) or by a [`ToolDefinitionBuilder`] (`builder.rs`); both take their arguments
//! through `args.rs`.

mod args;
mod builder;
mod typed;

pub use builder::ToolDefinitionBuilder;

use futures::future::BoxFuture;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

pub use crate::annotations::ToolAnnotations;
use crate::call::ToolExec;
use crate::cards::{CallView, ResultView};
use crate::error::{ErrorCode, ToolError};
use crate::presentation::presenter::guarded;
use crate::result::{ContentBlock, ToolFailure, ToolResult};
use crate::validate::{SchemaValidator, invalid_output};

/// What a successful dispatch produced: the canonical value, its rendering, UI metadata and the
/// result card.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatched {
    /// Canonical JSON value.
    pub value: Value,
    /// Model-facing content.
    pub content: Vec<ContentBlock>,
    /// `presentation_meta` (top-level calls only).
    pub meta: Option<Value>,
    /// The completed-state card (`present_result`); `None` for the generic card.
    pub view: Option<ResultView>,
}

type DispatchFn = dyn Fn(Arc<Value>, ToolExec) -> BoxFuture<'static, Result<Dispatched, ToolFailure>>
    + Send
    + Sync;
type ClassifierFn = dyn Fn(&Value) -> bool + Send + Sync;
/// Validates arguments as the body would read them, without running it.
type CheckFn = dyn Fn(Arc<Value>) -> Result<Arc<Value>, ToolFailure> + Send + Sync;
/// Renders a substituted value: (arguments, value, top-level call) to content, `meta` and card.
type RenderFn = dyn Fn(&Value, &Value, bool) -> Result<Presented, ToolFailure> + Send + Sync;
/// A dynamic tool's renderer: (arguments, value) to content.
type ValueRenderFn = dyn Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync;

/// Content, `meta` and result card of one value.
type Presented = (Vec<ContentBlock>, Option<Value>, Option<ResultView>);
type FinalizeFn = dyn Fn(&ToolExec, &ToolResult) -> Option<Vec<ContentBlock>> + Send + Sync;
type PresentCallFn = dyn Fn(&Value) -> Option<CallView> + Send + Sync;
type PresentResultFn = dyn Fn(&Value, &Value) -> Option<ResultView> + Send + Sync;
type HandlerFn =
    dyn Fn(Value, ToolExec) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync;

/// A tool with its types erased: what the registry stores. Cheap to clone.
///
/// Built from a typed [`Tool`] with [`ToolDefinition::from_tool`], or at run time with
/// [`ToolDefinition::builder`] and a raw JSON Schema (MCP tools, runtime-defined tools).
#[derive(Clone)]
pub struct ToolDefinition {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    description: String,
    parameters: Value,
    output_schema: Option<Value>,
    output_validator: Option<Arc<SchemaValidator>>,
    timeout_ms: Option<u64>,
    classifier: Box<ClassifierFn>,
    check: Box<CheckFn>,
    dispatch: Box<DispatchFn>,
    render_value: Box<RenderFn>,
    finalize: Option<Box<FinalizeFn>>,
    present_call: Option<Box<PresentCallFn>>,
    annotations: Option<ToolAnnotations>,
    /// Served over MCP, a call may run as a task.
    task: bool,
    /// Served over MCP, a call runs only as a task.
    task_required: bool,
    /// Served over MCP 2026-07-28, a task's call asks for input before the task is made.
    input_before_task: bool,
    /// The body only observes its signal, never cancels it (see
    /// [`ToolDefinitionBuilder::body_leaves_signal_alone`]).
    leaves_signal_alone: bool,
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.inner.name)
            .field("timeout_ms", &self.inner.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// Why a dynamic definition could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The builder has no handler.
    #[error("tool \"{0}\" has no handler: call .handler(...) before .build()")]
    MissingHandler(String),
    /// The parameters or output schema is not a usable JSON Schema (`UNSUPPORTED_SCHEMA`).
    #[error("unsupported JSON schema: tool \"{tool}\" {which} schema: {message}")]
    UnsupportedSchema {
        /// Tool name.
        tool: String,
        /// `parameters` or `output`.
        which: &'static str,
        /// What `jsonschema` reported.
        message: String,
    },
    /// The parameters schema's root is not an object schema.
    #[error("tool \"{0}\" parameters schema must have \"type\": \"object\" at its root")]
    ParametersNotObject(String),
}

/// Runs an author's `render` or `presentation_meta`; a panic in it is the tool's invalid output
/// (`INVALID_TOOL_OUTPUT`, `output.render failed: <message>`), not a crash of the call.
fn presenter<R>(tool: &str, which: &str, run: impl FnOnce() -> R) -> Result<R, ToolFailure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|payload| {
        let message = crate::contain::panic_message(payload.as_ref());
        invalid_output(tool, &[format!("output.{which} failed: {message}")])
    })
}

impl ToolDefinition {
    /// The tool name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The description the model reads.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The parameters schema as derived or given (before any dialect transform).
    pub fn parameters(&self) -> &Value {
        &self.inner.parameters
    }

    /// The output schema, if declared.
    pub fn output_schema(&self) -> Option<&Value> {
        self.inner.output_schema.as_ref()
    }

    /// The declared timeout in ms. It is enforced once a `guards::TimeoutPolicy` is installed
    /// on the registry; without one it only documents the tool.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.inner.timeout_ms
    }

    /// Classifies a call: `true` only when the arguments parse and the classifier says so.
    pub fn is_concurrency_safe(&self, args: &Value) -> bool {
        (self.inner.classifier)(args)
    }

    /// Validates the arguments, runs the body, checks and renders its output. Does not run any
    /// pipeline stage; use [`Registry::execute`](crate::Registry::execute) for that.
    ///
    /// # Errors
    /// `INVALID_ARGS`, the body's own error, or `INVALID_TOOL_OUTPUT`.
    pub fn dispatch(
        &self,
        args: impl Into<Arc<Value>>,
        exec: ToolExec,
    ) -> BoxFuture<'static, Result<Dispatched, ToolFailure>> {
        (self.inner.dispatch)(args.into(), exec)
    }

    /// The arguments validated as a call's body would read them (an object, `null`s of absent
    /// optional properties dropped, the parameters schema and the tool's own constraints), without
    /// running the body: what a person is shown before approving a call.
    ///
    /// # Errors
    /// `INVALID_ARGS` naming every violation, as a dispatch would report it.
    pub fn validate_args(&self, args: Arc<Value>) -> Result<Arc<Value>, ToolFailure> {
        (self.inner.check)(args)
    }

    /// Validates a replacement value against the output schema and presents it the way the
    /// body's own value would be (post-execute `Accept { value }`, wrapper-authored successes):
    /// content from the tool's renderer, `meta` recomputed for a top-level call, and the result
    /// card.
    ///
    /// # Errors
    /// `INVALID_TOOL_OUTPUT` when the value breaks the output schema or a renderer panics.
    pub fn normalize_value(
        &self,
        args: &Value,
        value: Value,
        top_level: bool,
    ) -> Result<Dispatched, ToolFailure> {
        self.check_output(&value)?;
        let (content, meta, view) = (self.inner.render_value)(args, &value, top_level)?;
        Ok(Dispatched {
            value,
            content,
            meta,
            view,
        })
    }

    fn check_output(&self, value: &Value) -> Result<(), ToolFailure> {
        if let Some(validator) = &self.inner.output_validator {
            let violations = validator.violations(value, "value");
            if !violations.is_empty() {
                return Err(invalid_output(&self.inner.name, &violations));
            }
        } else if let Some(schema) = &self.inner.output_schema {
            // Typed tools skip validating their own bodies, but replacement values come from
            // elsewhere and must be checked.
            if let Ok(validator) = SchemaValidator::new(schema) {
                let violations = validator.violations(value, "value");
                if !violations.is_empty() {
                    return Err(invalid_output(&self.inner.name, &violations));
                }
            }
        }
        Ok(())
    }

    /// Runs `finalize_content`, if the tool has one.
    pub fn finalize_content(
        &self,
        exec: &ToolExec,
        result: &ToolResult,
    ) -> Option<Vec<ContentBlock>> {
        self.inner
            .finalize
            .as_ref()
            .and_then(|finalize| finalize(exec, result))
    }

    /// `true` when the tool declares `finalize_content`.
    pub fn has_finalize_content(&self) -> bool {
        self.inner.finalize.is_some()
    }

    /// `true` when the body never cancels its own signal, so it may be handed the call's
    /// signal itself instead of a child token.
    pub fn leaves_signal_alone(&self) -> bool {
        self.inner.leaves_signal_alone
    }

    /// The pending-state card for these arguments; `None` (also when the presenter panics) means
    /// the generic card. The completed-state card comes with the dispatch
    /// ([`Dispatched::view`]), made from the typed output.
    pub fn present_call(&self, args: &Value) -> Option<CallView> {
        let present = self.inner.present_call.as_ref()?;
        guarded(&self.inner.name, "present_call", || present(args))
    }

    /// The behaviour hints declared for this tool (MCP `annotations`), if any.
    pub fn annotations(&self) -> Option<&ToolAnnotations> {
        self.inner.annotations.as_ref()
    }

    /// Whether a call served over MCP may run as a task (the `io.modelcontextprotocol/tasks`
    /// extension): when the client declares the extension, `tools/call` answers at once with a
    /// task that `tasks/get` polls and `tasks/cancel` cancels through the call's signal. Set by
    /// `#[tool(task)]` ([`Tool::TASK`](crate::Tool::TASK)) or
    /// [`ToolDefinitionBuilder::task_support`]; `run_code` always is one.
    pub fn supports_tasks(&self) -> bool {
        self.inner.task
    }

    /// Whether a call served over MCP runs only as a task
    /// ([`ToolDefinitionBuilder::task_required`]): a client that does not declare the
    /// `io.modelcontextprotocol/tasks` extension gets the protocol's
    /// `MissingRequiredClientCapabilityError` (-32021) naming it, and the call does not run
    /// (SEP-2663, "Required Capabilities").
    pub fn requires_task(&self) -> bool {
        self.inner.task_required
    }

    /// Whether a call served over MCP 2026-07-28 as a task first asks for its input in
    /// `input_required` rounds of its `tools/call` and becomes a task only on the round that
    /// answers them ([`ToolDefinitionBuilder::input_before_task`]).
    pub fn input_before_task(&self) -> bool {
        self.inner.input_before_task
    }
}

impl From<ToolDefinition> for Vec<ToolDefinition> {
    fn from(definition: ToolDefinition) -> Self {
        vec![definition]
    }
}

/// The error every dispatch of a definition removed mid-call reports.
/// `unknown tool "reed_file"`, with the nearest of `visible` when one is close:
/// `; did you mean "read_file"?`.
pub fn unknown_tool(name: &str, visible: &[ToolDefinition]) -> ToolFailure {
    // The name comes from the model: bounded, its control characters escaped.
    let mut message = String::from("unknown tool \"");
    crate::validate::push_bounded(&mut message, name, 256);
    message.push('"');
    if let Some(near) = crate::validate::nearest(name, visible.iter().map(ToolDefinition::name)) {
        message.push_str(&format!("; did you mean \"{near}\"?"));
    }
    ToolFailure::coded(ErrorCode::UnknownTool, message)
}
