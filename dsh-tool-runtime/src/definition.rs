//! The type-erased tool.

use futures::future::BoxFuture;
use std::fmt;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

pub use crate::annotations::ToolAnnotations;
use crate::call::ToolExec;
use crate::dialect::normalize_strict_arguments;
use crate::error::{ErrorCode, ToolError};
use crate::json::{MAX_VALUE_DEPTH, dismantle};
use crate::presentation::presenter::guarded;
use crate::presentation::{CallView, ResultView};
use crate::result::{ContentBlock, ToolFailure, ToolResult};
use crate::tool::{Tool, ToolArgs, ToolOutput, default_render};
use crate::validate::{
    SchemaValidator, depth_violation, has_unenforced_constraints, invalid_args, invalid_output,
};

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

/// Removes top-level `null` values of properties that are not `required`: strict-mode clients send
/// `null` for "absent". Copies the arguments only when there is a `null` to drop.
fn drop_null_optionals(parameters: &Value, args: Arc<Value>) -> Arc<Value> {
    let Value::Object(map) = &*args else {
        return args;
    };
    if !map.values().any(Value::is_null) {
        return args;
    }
    let required = parameters
        .as_object()
        .map(crate::schema::required_names)
        .unwrap_or_default();
    let mut map = map.clone();
    map.retain(|key, value| !value.is_null() || required.contains(key));
    Arc::new(Value::Object(map))
}

/// Refuses too-deep arguments, dropping them without recursion when this is the last handle.
fn check_depth(args: Arc<Value>) -> Result<Arc<Value>, ToolFailure> {
    match depth_violation(&args, "") {
        None => Ok(args),
        Some(violation) => {
            if let Ok(value) = Arc::try_unwrap(args) {
                dismantle(value);
            }
            Err(invalid_args(&[violation]))
        }
    }
}

/// `true` when a `null` appears anywhere in `value` (iterative).
fn contains_null(value: &Value) -> bool {
    crate::json::walk(value, |node, _| match node {
        Value::Null => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Rewrites floats with no fractional part (`1.0`) as integers, which JSON Schema 2020-12 counts as
/// integers and serde's integer types reject. Iterative.
fn integralize(value: &mut Value) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Number(number) if number.is_f64() => {
                let float = number.as_f64().unwrap_or(f64::NAN);
                if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 {
                    // Within ±2^53 the conversion is exact.
                    *node = Value::from(float as i64);
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

/// A serde error the schema did not catch, named by the path where it happened
/// (`"n": invalid value: …`); the path uses serde's `a.b[0]` form, like the schema messages.
fn serde_violation<A: ToolArgs>(args: &Value, fallback: &serde_json::Error) -> String {
    let mut track = serde_path_to_error::Track::new();
    match A::deserialize_args(serde_path_to_error::Deserializer::new(args, &mut track)) {
        Err(err) => match track.path().to_string() {
            path if path != "." => format!("\"{path}\": {err}"),
            _ => fallback.to_string(),
        },
        Ok(_) => fallback.to_string(),
    }
}

/// Runs an author's `render` or `presentation_meta`; a panic in it is the tool's invalid output
/// (`INVALID_TOOL_OUTPUT`, `output.render failed: <message>`), not a crash of the call.
fn presenter<R>(tool: &str, which: &str, run: impl FnOnce() -> R) -> Result<R, ToolFailure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|payload| {
        let message = crate::call::panic_message(payload.as_ref());
        invalid_output(tool, &[format!("output.{which} failed: {message}")])
    })
}

/// Whether any hook needs the typed arguments after the body consumed them (which costs a second
/// deserialization).
fn renders_with_args<T: Tool>() -> bool {
    T::RENDER.is_some() || T::PRESENT_RESULT.is_some() || T::PRESENTATION_META.is_some()
}

/// Content, `meta` (top-level calls only) and result card of a typed output, through the tool's
/// own hooks.
fn present_typed<T: Tool>(
    typed: &T::Args,
    output: &T::Output,
    value: &Value,
    top_level: bool,
) -> Result<Presented, ToolFailure> {
    let meta = match T::PRESENTATION_META {
        Some(meta) if top_level => presenter(T::NAME, "presentationMeta", || meta(typed, output))?,
        _ => None,
    };
    let view = T::PRESENT_RESULT.and_then(|present| {
        guarded(T::NAME, "present_result", || {
            present(typed, output, meta.as_ref())
        })
    });
    let content = match T::RENDER {
        Some(render) => presenter(T::NAME, "render", || render(typed, output))?,
        None => None,
    }
    .unwrap_or_else(|| default_render(value));
    Ok((content, meta, view))
}

/// The arguments as both dispatch paths (typed tools and builder-made ones) first take them: an
/// object (a non-object becomes `{}` when the tool `coerce_non_object`s, else it is refused),
/// no deeper than the validator walks, and without the `null`s strict-mode clients send for
/// absent optional properties. The pipeline has checked the depth before any hook saw the
/// arguments; [`ToolDefinition::dispatch`] is public and may be called outside it, so the check
/// is made again here.
fn prepare_args(
    parameters: &Value,
    args: Arc<Value>,
    coerce_non_object: bool,
) -> Result<Arc<Value>, ToolFailure> {
    let args = if args.is_object() {
        args
    } else if coerce_non_object {
        Arc::new(Value::Object(serde_json::Map::new()))
    } else {
        return Err(invalid_args(
            &["\"arguments\" must be an object".to_owned()],
        ));
    };
    let args = check_depth(args)?;
    Ok(drop_null_optionals(parameters, args))
}

/// A typed tool's arguments, prepared ([`prepare_args`]) and read as `T::Args`, with the schema
/// constraints serde cannot see checked (`schema_checks`) and the tool's own constraints.
///
/// # Errors
/// `INVALID_ARGS` naming every violation.
fn typed_args<T: Tool>(
    parameters: &Value,
    validator: Option<&SchemaValidator>,
    schema_checks: bool,
    args: Arc<Value>,
) -> Result<(Arc<Value>, T::Args), ToolFailure> {
    let args = prepare_args(parameters, args, false)?;
    let typed = match T::Args::deserialize_args(&*args) {
        Ok(typed) => typed,
        Err(serde_error) => {
            // Slow path: nested `null`s from a strict-mode client, or `1.0` for an integer (JSON
            // Schema counts it as one; serde does not), may be all that is wrong; otherwise
            // report every violation.
            let mut normalized = normalize_strict_arguments(parameters, Value::clone(&args));
            integralize(&mut normalized);
            match T::Args::deserialize_args(&normalized) {
                Ok(typed) => typed,
                Err(_) => {
                    let mut violations = match validator {
                        Some(validator) => validator.violations(&args, ""),
                        None => Vec::new(),
                    };
                    if violations.is_empty() {
                        violations.push(serde_violation::<T::Args>(&normalized, &serde_error));
                    }
                    return Err(invalid_args(&violations));
                }
            }
        }
    };
    if schema_checks
        && let Some(validator) = validator
        && !validator.is_valid(&args)
    {
        // Judged as serde read them: a nested `null` of an optional property is absent,
        // whichever constraint made this check run.
        let mut normalized = normalize_strict_arguments(parameters, Value::clone(&args));
        integralize(&mut normalized);
        let violations = validator.violations(&normalized, "");
        if !violations.is_empty() {
            return Err(invalid_args(&violations));
        }
    }
    let violations = T::check_constraints(&typed);
    if !violations.is_empty() {
        return Err(invalid_args(&violations));
    }
    Ok((args, typed))
}

/// A typed tool erased into its definition, so that `registry.register(ReadFileTool)` works.
impl<T: Tool> From<T> for ToolDefinition {
    fn from(tool: T) -> Self {
        ToolDefinition::from_tool(tool)
    }
}

impl ToolDefinition {
    /// Erases a typed tool. Its schemas are derived here, once.
    pub fn from_tool<T: Tool>(tool: T) -> Self {
        let tool = Arc::new(tool);
        let parameters = T::parameters_schema();
        let output_schema = T::output_schema();
        let validator = Arc::new(SchemaValidator::new(&parameters).ok());
        // Constraints serde cannot see (`#[schemars(range(..))]` on an `#[args]` struct, or on a
        // nested type) are checked against the schema before the body runs.
        let schema_checks = has_unenforced_constraints(&parameters);
        // Shared, not copied per call: the schema is only read.
        let params_for_dispatch = Arc::new(parameters.clone());
        // Compiled on first need only: most outputs contain no `null` and are never checked.
        let output_check: Arc<OnceLock<Option<SchemaValidator>>> = Arc::default();
        let check = {
            let validator = validator.clone();
            let parameters = params_for_dispatch.clone();
            move |args: Arc<Value>| {
                typed_args::<T>(
                    &parameters,
                    validator.as_ref().as_ref(),
                    schema_checks,
                    args,
                )
                .map(|(args, _)| args)
            }
        };
        let dispatch = move |args: Arc<Value>,
                             exec: ToolExec|
              -> BoxFuture<'static, Result<Dispatched, ToolFailure>> {
            let tool = tool.clone();
            let validator = validator.clone();
            let parameters = params_for_dispatch.clone();
            let output_check = output_check.clone();
            Box::pin(async move {
                let (args, typed) = typed_args::<T>(
                    &parameters,
                    validator.as_ref().as_ref(),
                    schema_checks,
                    args,
                )?;
                let top_level = !exec.is_nested();
                let output = tool.call(typed, exec).await.map_err(ToolFailure::from)?;
                let value = output.to_json().map_err(|err| {
                    invalid_output(T::NAME, &[format!("value is not lossless JSON: {err}")])
                })?;
                // serde_json writes NaN and infinities as `null`: where the output schema
                // does not allow a `null`, that is a lossy value, not a success.
                if contains_null(&value)
                    && let Some(validator) =
                        output_check.get_or_init(|| SchemaValidator::new(&T::output_schema()).ok())
                {
                    let violations = validator.violations(&value, "value");
                    if !violations.is_empty() {
                        return Err(invalid_output(T::NAME, &violations));
                    }
                }
                // `call` consumed the typed arguments; only tools with a custom renderer or
                // presenter pay for a second deserialization.
                let (content, meta, view) = match renders_with_args::<T>()
                    .then(|| T::Args::deserialize_args(&*args).ok())
                    .flatten()
                {
                    Some(typed) => present_typed::<T>(&typed, &output, &value, top_level)?,
                    None => (default_render(&value), None, None),
                };
                Ok(Dispatched {
                    value,
                    content,
                    meta,
                    view,
                })
            })
        };
        let finalize: Option<Box<FinalizeFn>> =
            T::FINALIZE_CONTENT.map(|finalize| Box::new(finalize) as Box<FinalizeFn>);
        ToolDefinition {
            inner: Arc::new(Inner {
                name: T::NAME.to_owned(),
                description: T::DESCRIPTION.to_owned(),
                parameters,
                output_schema: Some(output_schema),
                // Typed outputs match their derived schema by construction: no runtime check.
                output_validator: None,
                timeout_ms: T::TIMEOUT_MS,
                classifier: Box::new(|args| {
                    args.is_object()
                        && T::Args::deserialize_args(args)
                            .is_ok_and(|typed| T::is_concurrency_safe(&typed))
                }),
                check: Box::new(check),
                dispatch: Box::new(dispatch),
                render_value: Box::new(|args, value, top_level| {
                    let typed = renders_with_args::<T>()
                        .then(|| T::Args::deserialize_args(args).ok())
                        .flatten();
                    match typed.zip(T::output_from_value(value)) {
                        Some((typed, output)) => {
                            present_typed::<T>(&typed, &output, value, top_level)
                        }
                        None => Ok((default_render(value), None, None)),
                    }
                }),
                finalize,
                present_call: Some(Box::new(|args| {
                    T::Args::deserialize_args(args)
                        .ok()
                        .and_then(|typed| T::present_call(&typed))
                })),
                annotations: T::ANNOTATIONS.map(ToolAnnotations::from),
                task: T::TASK,
                task_required: false,
                input_before_task: false,
                // A tool body is the author's code: it may cancel its own signal.
                leaves_signal_alone: false,
            }),
        }
    }

    /// Starts a dynamic definition with a raw JSON Schema.
    pub fn builder(name: impl Into<String>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            output_schema: None,
            timeout_ms: None,
            classifier: None,
            handler: None,
            render: None,
            finalize: None,
            present_call: None,
            annotations: None,
            task: false,
            task_required: false,
            input_before_task: false,
            coerce_non_object: false,
            output_checked_by_handler: false,
            leaves_signal_alone: false,
            present_result: None,
        }
    }

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

/// Builds a [`ToolDefinition`] from a raw JSON Schema and a JSON handler.
///
/// Arguments are validated against `parameters` with the `jsonschema` crate (unlike DSH, which
/// trusts raw registrations), and the handler's value against `output_schema` when one is given.
pub struct ToolDefinitionBuilder {
    name: String,
    description: String,
    parameters: Value,
    output_schema: Option<Value>,
    timeout_ms: Option<u64>,
    classifier: Option<Box<ClassifierFn>>,
    handler: Option<Arc<HandlerFn>>,
    render: Option<Box<ValueRenderFn>>,
    finalize: Option<Box<FinalizeFn>>,
    present_call: Option<Box<PresentCallFn>>,
    annotations: Option<ToolAnnotations>,
    task: bool,
    task_required: bool,
    input_before_task: bool,
    coerce_non_object: bool,
    output_checked_by_handler: bool,
    leaves_signal_alone: bool,
    present_result: Option<Box<PresentResultFn>>,
}

impl std::fmt::Debug for ToolDefinitionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The handler, classifier and presenters are closures.
        f.debug_struct("ToolDefinitionBuilder")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("output_schema", &self.output_schema)
            .field("timeout_ms", &self.timeout_ms)
            .field("has_handler", &self.handler.is_some())
            .finish_non_exhaustive()
    }
}

impl ToolDefinitionBuilder {
    /// Behaviour hints kept on the definition (MCP `annotations`); they change nothing by
    /// themselves (pair `read_only_hint` with [`concurrency_safe`](Self::concurrency_safe)).
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// Lets a call served over MCP run as a task (see [`ToolDefinition::supports_tasks`]).
    pub fn task_support(mut self) -> Self {
        self.task = true;
        self
    }

    /// Lets a call served over MCP run only as a task (see
    /// [`ToolDefinition::requires_task`]); implies [`task_support`](Self::task_support).
    pub fn task_required(mut self) -> Self {
        self.task = true;
        self.task_required = true;
        self
    }

    /// Served over MCP 2026-07-28 as a task, the call first asks for its input (elicitation,
    /// sampling, roots) in `input_required` rounds of its `tools/call`, and the client's retry
    /// that answers them gets the task (SEP-2322 rounds, then a SEP-2663 `CreateTaskResult`);
    /// a call that asks nothing answers at once. Without it the task is made at once and its
    /// requests wait in the task's `input_required` state. Implies
    /// [`task_support`](Self::task_support).
    pub fn input_before_task(mut self) -> Self {
        self.task = true;
        self.input_before_task = true;
        self
    }

    /// Non-object arguments (`null`, a string, …) are replaced by `{}` before validation instead of
    /// failing with `"arguments" must be an object` (the MCP bridge's rule, as in DSH).
    pub fn coerce_non_object_arguments(mut self) -> Self {
        self.coerce_non_object = true;
        self
    }

    /// The handler only ever returns values the output schema accepts (the MCP bridge builds
    /// `{content, structuredContent?}` itself for a tool that declares no `outputSchema`), so a
    /// call skips validating them.
    pub fn output_checked_by_handler(mut self) -> Self {
        self.output_checked_by_handler = true;
        self
    }

    /// The handler only observes `exec.signal()` and never cancels it (the MCP bridge's), so a
    /// call skips making the child token that keeps a body's own cancel from reaching its
    /// caller.
    pub fn body_leaves_signal_alone(mut self) -> Self {
        self.leaves_signal_alone = true;
        self
    }

    /// The pending-state UI card for a call's raw arguments.
    pub fn present_call(
        mut self,
        present: impl Fn(&Value) -> Option<CallView> + Send + Sync + 'static,
    ) -> Self {
        self.present_call = Some(Box::new(present));
        self
    }

    /// The completed-state UI card of a success, from the raw arguments and the value; a panic
    /// shows the generic card.
    pub fn present_result(
        mut self,
        present: impl Fn(&Value, &Value) -> Option<ResultView> + Send + Sync + 'static,
    ) -> Self {
        self.present_result = Some(Box::new(present));
        self
    }

    /// The description the model reads.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The parameters schema (object root; JSON Schema 2020-12).
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }

    /// The output schema; successful values are validated against it.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Declared timeout in ms (validated at registration: must be > 0), enforced once a
    /// `guards::TimeoutPolicy` is installed on the registry.
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Marks every call parallel-safe.
    pub fn concurrency_safe(self) -> Self {
        self.classifier(|_| true)
    }

    /// A classifier over the raw arguments.
    pub fn classifier(
        mut self,
        classifier: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.classifier = Some(Box::new(classifier));
        self
    }

    /// The body: receives validated JSON arguments.
    pub fn handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Value, ToolExec) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |args, exec| Box::pin(handler(args, exec))));
        self
    }

    /// Custom rendering `(args, value) -> content` (default: [`default_render`]).
    pub fn render(
        mut self,
        render: impl Fn(&Value, &Value) -> Vec<ContentBlock> + Send + Sync + 'static,
    ) -> Self {
        self.render = Some(Box::new(render));
        self
    }

    /// `finalize_content`, called exactly once per outcome.
    pub fn finalize_content(
        mut self,
        finalize: impl Fn(&ToolExec, &ToolResult) -> Option<Vec<ContentBlock>> + Send + Sync + 'static,
    ) -> Self {
        self.finalize = Some(Box::new(finalize));
        self
    }

    /// Compiles the schemas and returns the definition.
    ///
    /// # Errors
    /// [`DefinitionError`] for a missing handler, a non-object parameters root, or a schema
    /// `jsonschema` cannot compile.
    pub fn build(self) -> Result<ToolDefinition, DefinitionError> {
        let name = self.name;
        let handler = self
            .handler
            .ok_or_else(|| DefinitionError::MissingHandler(name.clone()))?;
        // Checked before anything recursive (clone, compile, validation) touches the schemas:
        // a hostile MCP server's schema must not overflow the stack.
        let too_deep = [
            ("parameters", Some(&self.parameters)),
            ("output", self.output_schema.as_ref()),
        ]
        .into_iter()
        .find_map(|(which, schema)| {
            schema
                .and_then(|schema| depth_violation(schema, ""))
                .map(|_| which)
        });
        {
            if let Some(which) = too_deep {
                dismantle(self.parameters);
                if let Some(output) = self.output_schema {
                    dismantle(output);
                }
                return Err(DefinitionError::UnsupportedSchema {
                    tool: name,
                    which,
                    message: format!("nested deeper than {MAX_VALUE_DEPTH} levels"),
                });
            }
        }
        if self.parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(DefinitionError::ParametersNotObject(name));
        }
        let validator = SchemaValidator::new(&self.parameters).map_err(|message| {
            DefinitionError::UnsupportedSchema {
                tool: name.clone(),
                which: "parameters",
                message,
            }
        })?;
        let output_validator = match &self.output_schema {
            Some(schema) => Some(Arc::new(SchemaValidator::new(schema).map_err(
                |message| DefinitionError::UnsupportedSchema {
                    tool: name.clone(),
                    which: "output",
                    message,
                },
            )?)),
            None => None,
        };
        let parameters = self.parameters.clone();
        let render: Arc<ValueRenderFn> = match self.render {
            Some(render) => Arc::from(render),
            None => Arc::new(|_: &Value, value: &Value| default_render(value)),
        };
        // What a call needs, behind one `Arc`: a call clones one pointer, not each part.
        let shared = Arc::new(DynamicDispatch {
            handler,
            validator,
            parameters,
            render: render.clone(),
            output_validator: output_validator
                .clone()
                .filter(|_| !self.output_checked_by_handler),
            tool_name: name.clone(),
            coerce_non_object: self.coerce_non_object,
            present_result: self.present_result.map(Arc::from),
        });
        let check = {
            let shared = shared.clone();
            move |args: Arc<Value>| shared.checked_args(args)
        };
        let dispatch = move |args: Arc<Value>,
                             exec: ToolExec|
              -> BoxFuture<'static, Result<Dispatched, ToolFailure>> {
            let shared = shared.clone();
            Box::pin(async move { shared.dispatch(args, exec).await })
        };
        let classifier = self.classifier.unwrap_or_else(|| Box::new(|_| false));
        let name_for_render = name.clone();
        Ok(ToolDefinition {
            inner: Arc::new(Inner {
                name,
                description: self.description,
                parameters: self.parameters,
                output_schema: self.output_schema,
                output_validator,
                timeout_ms: self.timeout_ms,
                classifier,
                check: Box::new(check),
                dispatch: Box::new(dispatch),
                render_value: Box::new(move |args, value, _| {
                    let content = presenter(&name_for_render, "render", || render(args, value))?;
                    Ok((content, None, None))
                }),
                finalize: self.finalize,
                present_call: self.present_call,
                annotations: self.annotations,
                task: self.task,
                task_required: self.task_required,
                input_before_task: self.input_before_task,
                leaves_signal_alone: self.leaves_signal_alone,
            }),
        })
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

/// The parts of a dynamic tool a call uses.
struct DynamicDispatch {
    handler: Arc<HandlerFn>,
    validator: SchemaValidator,
    parameters: Value,
    render: Arc<ValueRenderFn>,
    output_validator: Option<Arc<SchemaValidator>>,
    tool_name: String,
    coerce_non_object: bool,
    present_result: Option<Arc<PresentResultFn>>,
}

impl DynamicDispatch {
    /// The arguments prepared ([`prepare_args`]) and validated against the schema.
    fn checked_args(&self, args: Arc<Value>) -> Result<Arc<Value>, ToolFailure> {
        let args = prepare_args(&self.parameters, args, self.coerce_non_object)?;
        // The common case, valid arguments, costs one validation pass and no clone of the
        // schema's error list. Their depth is checked just above, and normalizing never deepens.
        let args = if self.validator.is_valid_within_depth(&args) {
            args
        } else {
            // Nested `null`s from a strict-mode client read as absent.
            let normalized = normalize_strict_arguments(&self.parameters, Value::clone(&args));
            if self.validator.is_valid_within_depth(&normalized) {
                Arc::new(normalized)
            } else {
                let violations = self.validator.violations(&args, "");
                if !violations.is_empty() {
                    return Err(invalid_args(&violations));
                }
                args
            }
        };
        Ok(args)
    }

    async fn dispatch(&self, args: Arc<Value>, exec: ToolExec) -> Result<Dispatched, ToolFailure> {
        let args = self.checked_args(args)?;
        let value = (self.handler)(Value::clone(&args), exec)
            .await
            .map_err(ToolFailure::from)?;
        if let Some(validator) = &self.output_validator
            && !validator.is_valid(&value)
        {
            let violations = validator.violations(&value, "value");
            if !violations.is_empty() {
                return Err(invalid_output(&self.tool_name, &violations));
            }
        }
        let content = presenter(&self.tool_name, "render", || (self.render)(&args, &value))?;
        let view = self.present_result.as_ref().and_then(|present| {
            guarded(&self.tool_name, "present_result", || present(&args, &value))
        });
        Ok(Dispatched {
            value,
            content,
            meta: None,
            view,
        })
    }
}
