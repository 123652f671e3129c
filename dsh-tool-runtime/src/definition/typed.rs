//! A typed [`Tool`] erased into a [`ToolDefinition`]: its schemas derived once, its
//! presenters and rendering wired to the typed arguments and output.

use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::args::{contains_null, typed_args};
use super::{Dispatched, FinalizeFn, Inner, Presented, ToolDefinition, presenter};
use crate::annotations::ToolAnnotations;
use crate::call::ToolExec;
use crate::presentation::presenter::guarded;
use crate::result::ToolFailure;
use crate::tool::{Tool, ToolArgs, ToolOutput, default_render};
use crate::validate::{SchemaValidator, has_unenforced_constraints, invalid_output};

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
}
