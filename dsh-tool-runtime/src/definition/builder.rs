//! A dynamic definition: a raw JSON Schema and a JSON handler ([`ToolDefinitionBuilder`]),
//! its arguments checked by the `jsonschema` crate.

use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use super::args::prepare_args;
use super::{
    ClassifierFn, DefinitionError, Dispatched, FinalizeFn, HandlerFn, Inner, PresentCallFn,
    PresentResultFn, ToolDefinition, ValueRenderFn, presenter,
};
use crate::annotations::ToolAnnotations;
use crate::call::ToolExec;
use crate::cards::{CallView, ResultView};
use crate::dialect::normalize_strict_arguments;
use crate::error::ToolError;
use crate::json::{MAX_VALUE_DEPTH, dismantle};
use crate::presentation::presenter::guarded;
use crate::result::{ContentBlock, ToolFailure, ToolResult};
use crate::tool::default_render;
use crate::validate::{SchemaValidator, depth_violation, invalid_args, invalid_output};

impl ToolDefinition {
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
