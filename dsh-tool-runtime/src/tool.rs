//! The trait `#[tool]` implements.

use std::future::Future;

use schemars::JsonSchema;
use serde::Deserializer;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::call::ToolExec;
use crate::cards::{CallView, ResultView};
use crate::error::ToolError;
use crate::result::{ContentBlock, ToolResult};

/// What [`Tool::Args`] must be: read from the model's JSON (`Deserialize`) and described by the
/// parameters schema (`JsonSchema`, deserialize view). Implemented for every such type; derive
/// the two traits (`#[tool_type]`, see the guide's tools chapter, `docs/guide/01-tools.md`) rather than implementing this.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the arguments of a `#[tool]`: it must implement `Deserialize` and `JsonSchema`",
    label = "not usable as tool arguments",
    note = "put `#[dsh_tools::tool_type]` on your type; to derive by hand: `dsh_tools::serde::Deserialize` (with `#[serde(crate = \"dsh_tools::serde\")]`) and `dsh_tools::schemars::JsonSchema` (with `#[schemars(crate = \"dsh_tools::schemars\")]`)"
)]
pub trait ToolArgs: Sized {
    /// Reads the arguments from a serde deserializer (`serde_json::Value` in the registry).
    ///
    /// # Errors
    /// The deserializer's error when the JSON does not fit the type.
    fn deserialize_args<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
    /// The parameters schema (JSON Schema 2020-12, object root; `additionalProperties: false`
    /// when `deny_unknown` or when the type refuses unknown keys itself).
    fn parameters_schema(deny_unknown: bool) -> Value;
}
// Reported as `T: ToolArgs` with the derive hint, not once per missing trait: the trait has no
// supertraits, whose obligations rustc would report one by one.
#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned + JsonSchema> ToolArgs for T {
    fn deserialize_args<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer)
    }
    fn parameters_schema(deny_unknown: bool) -> Value {
        crate::schema::parameters_schema::<T>(deny_unknown)
    }
}

/// What [`Tool::Output`] must be: serialized for the model (`Serialize`) and described by the
/// output schema (`JsonSchema`, serialize view). Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[tool]` output: it must implement `Serialize` and `JsonSchema`",
    label = "not usable as a tool output",
    note = "put `#[dsh_tools::tool_type]` on your type; to derive by hand: `dsh_tools::serde::Serialize` (with `#[serde(crate = \"dsh_tools::serde\")]`) and `dsh_tools::schemars::JsonSchema` (with `#[schemars(crate = \"dsh_tools::schemars\")]`); for a type of another crate, return a `String` or a type of yours"
)]
pub trait ToolOutput {
    /// The output as a JSON value.
    ///
    /// # Errors
    /// serde's error when the value has no JSON form (a map with non-string keys, a failing
    /// `Serialize` impl).
    fn to_json(&self) -> serde_json::Result<Value>;
    /// The output schema (JSON Schema 2020-12 of what serde writes; `null` for `()`).
    fn output_schema() -> Value;
}
#[diagnostic::do_not_recommend]
impl<T: Serialize + JsonSchema> ToolOutput for T {
    fn to_json(&self) -> serde_json::Result<Value> {
        serde_json::to_value(self)
    }
    fn output_schema() -> Value {
        crate::schema::output_schema::<T>()
    }
}

/// A statically typed tool. `#[tool]` implements it on a generated `<CamelName>Tool` struct;
/// implement it by hand only when a macro does not fit.
///
/// The registry erases it into a [`ToolDefinition`](crate::ToolDefinition) with
/// [`ToolDefinition::from_tool`](crate::ToolDefinition::from_tool).
pub trait Tool: Send + Sync + 'static {
    /// The arguments, deserialized from the model's JSON.
    type Args: ToolArgs + Send + Sync + 'static;
    /// The canonical output value.
    type Output: ToolOutput + Send + 'static;

    /// The tool name, `^[A-Za-z0-9_-]{1,64}$`.
    const NAME: &'static str;
    /// The description the model reads.
    const DESCRIPTION: &'static str;
    /// Declared timeout in ms (honoured by the timeout policy; never sent to the model).
    const TIMEOUT_MS: Option<u64> = None;
    /// Closes the parameter root (`additionalProperties: false`) even when [`Tool::Args`]
    /// accepts unknown keys. `#[tool]` leaves it `false`: its arguments struct refuses them itself
    /// (serde's `deny_unknown_fields`, which schemars writes as `additionalProperties: false`)
    /// unless the tool is `allow_unknown`.
    const DENY_UNKNOWN: bool = false;
    /// The MCP behaviour hints and title the tool declares (`#[tool(read_only, title = "…")]`);
    /// served to MCP hosts as declared, and nothing when `None`.
    const ANNOTATIONS: Option<crate::annotations::DeclaredAnnotations> = None;
    /// Served over MCP, a call may run as a task (the `io.modelcontextprotocol/tasks`
    /// extension): a client that declares the extension gets a task id at once and polls for
    /// the result. `#[tool(task)]` sets it; see [`ToolDefinition::supports_tasks`](crate::ToolDefinition::supports_tasks).
    const TASK: bool = false;

    /// Runs the body.
    fn call(
        &self,
        args: Self::Args,
        exec: ToolExec,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// The concurrency classifier: `true` lets the call overlap with other parallel-safe calls.
    fn is_concurrency_safe(_args: &Self::Args) -> bool {
        false
    }

    /// Checks the `#[arg]` constraints (`range`, `length`, `pattern`) that serde cannot; returns
    /// every violation worded like argument validation's (`"n" must be >= 1`).
    fn check_constraints(_args: &Self::Args) -> Vec<String> {
        Vec::new()
    }

    /// Renders the body's output to model-facing content; without one (the default), or when it
    /// returns `None`, the JSON value is rendered with [`default_render`]. Values that a
    /// post-execute hook or an execute wrapper substitutes are validated against the output
    /// schema and go through the same hooks when [`Tool::output_from_value`] can read them back
    /// (else [`default_render`], without `meta`).
    ///
    /// [`Tool::RENDER`], [`Tool::PRESENT_RESULT`] and [`Tool::PRESENTATION_META`] need the typed
    /// arguments after the body consumed them: only a tool that sets one of them pays for a
    /// second deserialization. Being values, not overridable methods, they cannot be set
    /// without the pipeline knowing.
    const RENDER: Option<RenderHook<Self>> = None;

    /// The pending-state UI card (`None`: generic card with the tool name and raw arguments).
    /// Called once per call before its pre-execute hooks; a panic shows the generic card.
    fn present_call(_args: &Self::Args) -> Option<CallView> {
        None
    }

    /// The completed-state UI card of a success (`None`: keep the pending title and show the raw
    /// content). `meta` is [`Tool::PRESENTATION_META`]'s value, `None` for nested calls, so a
    /// presenter must also work without it. A panic shows the generic card. A value a post-execute
    /// hook or an execute wrapper substitutes gets its own card (none when it cannot be read back).
    const PRESENT_RESULT: Option<PresentResultHook<Self>> = None;

    /// Replayable UI metadata carried on the result as `meta`, computed for top-level calls only
    /// (code-mode sub-calls get none). A panic leaves the result without `meta`.
    const PRESENTATION_META: Option<PresentationMetaHook<Self>> = None;

    /// Replaces the final content of every outcome, called exactly once per call; `None` keeps it.
    /// Without one (the default) the pipeline skips the step.
    const FINALIZE_CONTENT: Option<FinalizeContentHook> = None;

    /// Rebuilds the typed output from a value another stage substituted for the body's (a
    /// post-execute `Accept { value }`, a wrapper-authored success), so that [`Tool::RENDER`],
    /// [`Tool::PRESENT_RESULT`] and [`Tool::PRESENTATION_META`] describe the substitute too.
    /// `#[tool]` implements it with the output type's `Deserialize` when it has one; `None` (the
    /// default) renders the substitute with [`default_render`] and leaves it without `meta`.
    fn output_from_value(_value: &Value) -> Option<Self::Output> {
        None
    }

    /// The parameters schema (JSON Schema 2020-12, object root).
    fn parameters_schema() -> Value {
        Self::Args::parameters_schema(Self::DENY_UNKNOWN)
    }

    /// The output schema (`null` for `()`).
    fn output_schema() -> Value {
        <Self::Output as ToolOutput>::output_schema()
    }
}

/// [`Tool::RENDER`]: the typed arguments and output to content (`None`: [`default_render`]).
pub type RenderHook<T> = fn(&<T as Tool>::Args, &<T as Tool>::Output) -> Option<Vec<ContentBlock>>;

/// [`Tool::PRESENT_RESULT`]: the completed-state card from the typed arguments, output and
/// `meta`.
pub type PresentResultHook<T> =
    fn(&<T as Tool>::Args, &<T as Tool>::Output, Option<&Value>) -> Option<ResultView>;

/// [`Tool::PRESENTATION_META`]: the replayable UI metadata of a top-level call.
pub type PresentationMetaHook<T> = fn(&<T as Tool>::Args, &<T as Tool>::Output) -> Option<Value>;

/// [`Tool::FINALIZE_CONTENT`]: the final content of any outcome (`None`: keep it).
pub type FinalizeContentHook = fn(&ToolExec, &ToolResult) -> Option<Vec<ContentBlock>>;

/// Default rendering: a JSON string becomes one text block with the string itself, anything else
/// pretty-printed JSON.
pub fn default_render(value: &Value) -> Vec<ContentBlock> {
    match value {
        Value::String(text) => vec![ContentBlock::text(text.clone())],
        other => vec![ContentBlock::text(
            serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
        )],
    }
}
