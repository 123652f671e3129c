//! The `#[tool]`, `#[toolbox]` and `#[tool_type]` attributes of dsh-tools. Use them through the
//! `dsh-tools` crate, which re-exports them with the runtime they expand to.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod plain_type;
mod root_derive;
mod symbol;
mod tool_type;

use proc_macro::TokenStream;

/// Turns an `async fn` into a tool a model can call.
///
/// ```
/// use dsh_tools::{tool, ToolError, ToolExec};
///
/// /// Read a UTF-8 text file and return a window of its lines.
/// #[tool(concurrency_safe, timeout_ms = 5_000)]
/// async fn read_file(
///     /// Absolute path of the file.
///     path: String,
///     /// First line to return, 1-based.
///     #[arg(default = 1, range(min = 1))]
///     offset: u64,
///     /// Maximum number of lines.
///     limit: Option<u32>,
///     exec: ToolExec,
/// ) -> Result<String, ToolError> {
///     # let _ = (path, offset, limit, exec);
///     Ok(String::new())
/// }
///
/// let definition = dsh_tools::ToolDefinition::from_tool(ReadFileTool);
/// ```
///
/// # What is generated
///
/// - The fn itself, unchanged except that parameter attributes are removed: call and test it
///   directly.
/// - `<CamelName>Args` (`ReadFileArgs`), a struct with the fn's visibility and one public field
///   per argument parameter, deriving `Deserialize` and `JsonSchema` through the runtime's
///   re-exports (no serde or schemars dependency needed). A parameter type without
///   `Deserialize` or `JsonSchema` is one compile error, on that type, with the derive to add.
/// - `<CamelName>Tool` (`ReadFileTool`), a unit struct implementing `dsh_tools::Tool`; erase it
///   with `ToolDefinition::from_tool(ReadFileTool)`.
///
/// # Parameters
///
/// Every parameter becomes a property of the parameters schema (JSON Schema 2020-12), named
/// after the identifier, except:
/// - a parameter whose type is named `ToolExec` (by value or `&ToolExec`) receives the call
///   context; a trait bound verifies it is `dsh_tools::ToolExec`;
/// - a single parameter marked `#[args]` whose type derives `Deserialize + Serialize +
///   JsonSchema` is used as the whole arguments struct (no other argument may sit next to it).
///
/// A parameter's `///` comment is its property description. `Option<T>` parameters are not
/// required; an explicit JSON `null` counts as absent. Parameter types must own their data (no
/// `&str`), and hold no type named `Duration`, which serde writes as `{secs, nanos}` (take
/// `timeout_ms: u64`; the same goes for the output and `#[tool_type]` fields). `#[arg(...)]` keys:
///
/// | key | effect |
/// | --- | --- |
/// | `description = "…"` | property description (instead of the `///` comment) |
/// | `rename = "wireName"` | property name on the wire |
/// | `default = <expr>` | value used when the property is absent; shown in the schema; not on `Option` |
/// | `range(min = N, max = N)` | number bounds (inclusive, number literals): `minimum`/`maximum` |
/// | `length(min = N, max = N)` | string length in characters, or item count of a list/set/map |
/// | `pattern = "regex"` | the string must match (unanchored, as JSON Schema's `pattern`) |
///
/// Constraints are in the schema and checked before the body runs; every violation is reported
/// (`invalid arguments: "offset" must be >= 1; …`).
///
/// The arguments object is closed: `additionalProperties: false` in the schema and serde's
/// `deny_unknown_fields` on the struct, so a key the tool does not declare is an `INVALID_ARGS`
/// answer (`unknown property "ofset"; did you mean "offset"?`). `#[tool(allow_unknown)]` opens
/// it. An `#[args]` struct decides for itself, through its own serde attributes.
///
/// # Output
///
/// `Result<T, E>` (any type named `Result` with two parameters or an alias such as
/// `io::Result<T>`) or a plain `T`, where `T: Serialize + JsonSchema` gives the output schema
/// (`()` ⇒ `{"type": "null"}`). `E` converts into a `dsh_tools::ToolError` through `Into` when
/// it can — a `ToolError` itself, or an error type of yours with `impl From<E> for ToolError`,
/// keeping the code and name the `From` sets — and otherwise through `Display` (message only:
/// `String`, `std::io::Error`, `anyhow::Error`, …). So an error type gets its code in one place:
///
/// ```
/// use dsh_tools::{tool, ToolError};
///
/// enum BankError {
///     Overdrawn,
/// }
///
/// impl From<BankError> for ToolError {
///     fn from(err: BankError) -> Self {
///         match err {
///             BankError::Overdrawn => ToolError::new("insufficient funds").with_code("E_FUNDS"),
///         }
///     }
/// }
///
/// /// Withdraw from the account.
/// #[tool]
/// async fn withdraw(amount: u64) -> Result<u64, BankError> {
///     100_u64.checked_sub(amount).ok_or(BankError::Overdrawn)
/// }
/// ```
///
/// # `#[tool(...)]` arguments
///
/// | key | default | meaning |
/// | --- | --- | --- |
/// | `name = "…"` | the fn name | `^[A-Za-z0-9_-]{1,64}$`; `run_code` and `mcp__…` are reserved |
/// | `description = "…"` | the fn's `///` comment | what the model reads; one of the two is required |
/// | `timeout_ms = N` | none | declared timeout in milliseconds, `N > 0`; needs a `ToolExec` parameter; enforced once `guards::TimeoutPolicy` is installed on the registry (it fires the call's signal, then ends the call as `TOOL_TIMEOUT`) |
/// | `concurrency_safe` | exclusive | every call may run in parallel with other safe calls |
/// | `concurrency_safe = path` | exclusive | classifier `fn(&Args) -> bool` |
/// | `render = path` | text or pretty JSON | `fn(&Args, &T) -> Vec<ContentBlock>` (or `Option<…>`) |
/// | `present_call = path` | generic card | `fn(&Args) -> CallView` (or `Option<CallView>`) |
/// | `present_result = path` | generic result card | `fn(&Args, &T, Option<&serde_json::Value>) -> ResultView` (or `Option<…>`): the output and the `presentation_meta` value |
/// | `presentation_meta = path` | none | `fn(&Args, &T) -> serde_json::Value` (or `Option<…>`), top-level calls only |
/// | `finalize_content = path` | none | `fn(&ToolExec, &ToolResult) -> Vec<ContentBlock>` (or `Option<…>`), once per outcome |
/// | `allow_unknown` | closed | unknown properties are accepted (and ignored); see below |
/// | `deny_unknown` | closed | the default said explicitly: unknown properties are refused; not with `allow_unknown` |
/// | `title = "…"` | from the name | MCP display title |
/// | `read_only` / `read_only = bool` | undeclared | MCP `readOnlyHint`: the tool modifies nothing; not with `destructive` |
/// | `destructive` / `destructive = bool` | undeclared | MCP `destructiveHint`: updates may destroy data |
/// | `idempotent` / `idempotent = bool` | undeclared | MCP `idempotentHint`: repeating a call has no further effect |
/// | `open_world` / `open_world = bool` | undeclared | MCP `openWorldHint`: the tool reaches external entities |
/// | `task` / `task = bool` | not a task | served over MCP, a call from a client that declares the `io.modelcontextprotocol/tasks` extension runs as a task: answered at once with a task id, then polled (`tasks/get`) and cancellable (`tasks/cancel`) |
/// | `args = Ident` | `<CamelName>Args` | name of the generated arguments struct |
/// | `crate = path` | `::dsh_tools` | path of the `dsh-tools` crate, for a renamed dependency |
///
/// Hook paths are resolved in the module of the fn (inside a toolbox, write `Files::render_x`,
/// not `Self::render_x`).
///
/// Mistakes are compile errors pointing at the token at fault, all reported at once.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// Turns the `#[tool]` methods of an inherent `impl` block into tools sharing one value.
///
/// ```
/// use std::sync::Arc;
/// use dsh_tools::{tool, toolbox};
///
/// struct Notes { prefix: String }
///
/// #[toolbox]
/// impl Notes {
///     /// Prefix a note.
///     #[tool(concurrency_safe)]
///     async fn note(&self, text: String) -> String {
///         format!("{}{text}", self.prefix)
///     }
/// }
///
/// let definitions = Arc::new(Notes { prefix: "- ".into() }).tools();
/// ```
///
/// Each `#[tool]` method takes `&self` and accepts every argument of [`tool`](macro@tool). For
/// each one, `<CamelName>Args` and `<CamelName>Tool(pub Arc<Self>)` are generated next to the
/// block, and `Self::tools(self: Arc<Self>) -> Vec<ToolDefinition>` returns them all. Generic
/// impls (with `where` clauses) are supported; the value must be `Send + Sync + 'static`, and
/// parameter types may not name `Self` or the impl's type parameters.
#[proc_macro_attribute]
pub fn toolbox(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::toolbox(args.into(), item.into()).into()
}

/// Derives what a tool's own parameter or output type needs — `Deserialize`, `Serialize` and
/// `JsonSchema`, each through the `dsh-tools` facade — so the crate needs no serde or schemars
/// dependency and no `#[serde(crate = …)]` / `#[schemars(crate = …)]` lines. Other serde and
/// schemars attributes on the type and its fields apply as written.
///
/// ```
/// use dsh_tools::{tool, tool_type};
///
/// #[tool_type]
/// enum Unit {
///     Celsius,
///     Fahrenheit,
/// }
///
/// #[tool_type]
/// struct Reading {
///     degrees: f64,
/// }
///
/// /// Read the thermometer.
/// #[tool]
/// async fn thermometer(unit: Unit) -> Reading {
///     let degrees = match unit {
///         Unit::Celsius => 21.0,
///         Unit::Fahrenheit => 69.8,
///     };
///     Reading { degrees }
/// }
/// ```
///
/// Like a tool's arguments, its structs and struct variants refuse unknown keys
/// (`#[serde(deny_unknown_fields)]`, `additionalProperties: false`). `#[tool_type(allow_unknown)]`
/// accepts them; a type with a `#[serde(flatten)]` field must say so, since serde cannot refuse
/// unknown keys next to a flattened field.
///
/// A field holding a `Duration` is a compile error (serde writes it as `{secs, nanos}`; use
/// `timeout_ms: u64`), unless it picks its own form with `#[serde(with = …)]` or is skipped.
///
/// `#[tool_type(crate = path)]` names a renamed `dsh-tools` dependency. On anything but a struct
/// or an enum it is a compile error.
#[proc_macro_attribute]
pub fn tool_type(args: TokenStream, item: TokenStream) -> TokenStream {
    tool_type::expand(args.into(), item.into()).into()
}

/// `dsh_tools::Deserialize` as a derive: a compile error that says to put
/// [`#[tool_type]`](macro@tool_type) on the type instead. (serde's own derive, named this way
/// without `#[serde(crate = "dsh_tools::serde")]`, fails with a dozen errors about a missing
/// `serde` crate.) To derive by hand, use `dsh_tools::serde::Deserialize` with that attribute.
///
/// ```compile_fail
/// #[derive(dsh_tools::Deserialize)]
/// struct Query {
///     text: String,
/// }
/// ```
#[proc_macro_derive(Deserialize, attributes(serde))]
pub fn derive_deserialize(item: TokenStream) -> TokenStream {
    root_derive::expand(item.into(), root_derive::Derive::Deserialize).into()
}

/// `dsh_tools::Serialize` as a derive: a compile error that says to put
/// [`#[tool_type]`](macro@tool_type) on the type instead. To derive by hand, use
/// `dsh_tools::serde::Serialize` with `#[serde(crate = "dsh_tools::serde")]`.
#[proc_macro_derive(Serialize, attributes(serde))]
pub fn derive_serialize(item: TokenStream) -> TokenStream {
    root_derive::expand(item.into(), root_derive::Derive::Serialize).into()
}

/// `dsh_tools::JsonSchema` as a derive: a compile error that says to put
/// [`#[tool_type]`](macro@tool_type) on the type instead. To derive by hand, use
/// `dsh_tools::schemars::JsonSchema` with `#[schemars(crate = "dsh_tools::schemars")]`.
#[proc_macro_derive(JsonSchema, attributes(schemars, serde, validate, garde))]
pub fn derive_json_schema(item: TokenStream) -> TokenStream {
    root_derive::expand(item.into(), root_derive::Derive::JsonSchema).into()
}
