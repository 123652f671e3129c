//! rig: a scope's tools as rig tools, every call through the registry's pipeline.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rig_core::message::{ImageMediaType, MimeType, ToolName, ToolResultContent};
use rig_core::tool::{DynamicTool, ToolErrorKind, ToolExecutionError, ToolOutput};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::content::{block_text, image};
use super::names::wire_names;
use super::step::has_null;
use super::{Provider, ProviderError, ToolLoop};
use crate::call::ToolCall;
use crate::dialect::normalize_strict_arguments;
use crate::error::ErrorCode;
use crate::registry::Registry;
use crate::result::{ContentBlock, ToolResult};
use crate::schedule::BatchOptions;
use crate::scope::AgentId;

/// What [`ToolLoop::rig_tools`] returns: the tools for rig's `AgentBuilder::dynamic_tools`,
/// and what goes with them.
#[derive(Debug)]
pub struct RigTools {
    /// One rig tool per tool the scope's mode presents (code mode: `run_code`), with the tool's
    /// description and provider-neutral parameters schema.
    pub tools: Vec<DynamicTool>,
    /// Code mode's system text (the prompt sections joined by blank lines), for the agent's
    /// preamble; `None` in native mode.
    pub preamble: Option<String>,
    /// Tools given to rig under another name, as `(registry name, rig name)`: rig sends names
    /// as they are, so a name OpenAI or Anthropic would refuse is renamed by their rule
    /// (see [`ProviderTools::renamed`](super::ProviderTools::renamed)).
    pub renamed: Vec<(String, String)>,
}

impl ToolLoop {
    /// The scope's tools as rig tools (rig-core 0.44's [`DynamicTool`]), for
    /// `rig_agent::AgentBuilder::dynamic_tools`.
    ///
    /// Every call rig makes runs through [`Registry::execute_batch`] for the loop's scope, under
    /// an id `rig_<n>` (rig gives a tool no call id): argument validation, pre-execute hooks and
    /// approval, guards, the timeout policy, wrappers, post-execute hooks and result observers,
    /// as any other call. A failure reaches rig as a [`ToolExecutionError`] whose kind follows the
    /// error code (`INVALID_ARGS` → `InvalidArgs`, `TOOL_TIMEOUT` → `Timeout`, `DENIED` →
    /// `PermissionDenied`, `UNKNOWN_TOOL` → `NotFound`, `ABORTED` and
    /// `ABORTED_BEFORE_DISPATCH` → `Cancelled`, others `Other`), whose `code` is the wire code
    /// and whose model output is the text the model would read (`Error: …`). A success is its
    /// content: text, and images as base64 image blocks. A result's additional contexts follow
    /// its content as text blocks (rig has no other place for them).
    ///
    /// An optional property sent as `null` (rig's strict tool schemas make every property
    /// required and nullable) is made absent before validation, as [`ToolLoop::step`] does.
    ///
    /// # Errors
    /// [`ProviderError::ModelView`] when the mode is code or both and no code runtime is mounted.
    pub fn rig_tools(&self) -> Result<RigTools, ProviderError> {
        let (schemas, preamble) = self.model_tools()?;
        let real: Vec<&str> = schemas.iter().map(|schema| schema.name.as_str()).collect();
        // rig sends tool names as they are; OpenAI's and Anthropic's rule is the narrowest of the
        // APIs rig speaks.
        let sent = wire_names(Provider::OpenAiChat, &real);
        let ids = Arc::new(AtomicU64::new(0));
        let mut tools = Vec::with_capacity(schemas.len());
        let mut renamed = Vec::new();
        for (schema, sent) in schemas.iter().zip(sent) {
            if sent != schema.name {
                renamed.push((schema.name.clone(), sent.clone()));
            }
            let declared = self
                .registry
                .get(&schema.name, self.scope.as_ref())
                .map_or_else(|| schema.parameters.clone(), |d| d.parameters().clone());
            let name =
                ToolName::new(sent).map_err(|error| ProviderError::Types(error.to_string()))?;
            let call = RigCall {
                registry: self.registry.clone(),
                scope: self.scope.clone(),
                tool: schema.name.clone(),
                declared: Arc::new(declared),
                ids: ids.clone(),
            };
            tools.push(DynamicTool::new(
                name,
                schema.description.clone(),
                schema.parameters.clone(),
                move |arguments| {
                    let call = call.clone();
                    Box::pin(async move { call.run(arguments).await })
                },
            ));
        }
        Ok(RigTools {
            tools,
            preamble,
            renamed,
        })
    }
}

/// One tool as rig calls it.
#[derive(Clone)]
struct RigCall {
    registry: Registry,
    scope: Option<AgentId>,
    tool: String,
    /// The schema as declared: what strict nulls are normalised against.
    declared: Arc<Value>,
    /// The counter of the `rig_<n>` call ids, shared by the tools of one `rig_tools()`.
    ids: Arc<AtomicU64>,
}

impl RigCall {
    async fn run(&self, arguments: Value) -> Result<ToolOutput, ToolExecutionError> {
        let arguments = if has_null(&arguments) {
            normalize_strict_arguments(&self.declared, arguments)
        } else {
            arguments
        };
        let id = format!("rig_{}", self.ids.fetch_add(1, Ordering::Relaxed));
        let options = BatchOptions {
            max_parallel: 1,
            signal: CancellationToken::new(),
        };
        let result = self
            .registry
            .execute_batch(
                self.scope.as_ref(),
                vec![ToolCall::new(id, self.tool.clone(), arguments)],
                options,
            )
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| {
                ToolResult::coded_failure(
                    ErrorCode::AbortedBeforeDispatch,
                    "tool call aborted before dispatch",
                )
            });
        into_rig(&result)
    }
}

/// A result as rig takes it: a success's content, or an error of the code's kind.
fn into_rig(result: &ToolResult) -> Result<ToolOutput, ToolExecutionError> {
    let mut content: Vec<ToolResultContent> = result.content().iter().map(rig_block).collect();
    for context in result.additional_contexts() {
        content.extend(context.content.iter().map(rig_block));
    }
    let output = if content.is_empty() {
        ToolOutput::text("")
    } else {
        ToolOutput::content(content)?
    };
    let Some(error) = result.error() else {
        return Ok(output);
    };
    let code = error.code();
    let kind = match &code {
        Some(ErrorCode::InvalidArgs) => ToolErrorKind::InvalidArgs,
        Some(ErrorCode::ToolTimeout) => ToolErrorKind::Timeout,
        Some(ErrorCode::Denied) => ToolErrorKind::PermissionDenied,
        Some(ErrorCode::UnknownTool) => ToolErrorKind::NotFound,
        Some(ErrorCode::Aborted | ErrorCode::AbortedBeforeDispatch) => ToolErrorKind::Cancelled,
        _ => ToolErrorKind::Other,
    };
    let mut rig = ToolExecutionError::new(kind, error.message.clone()).with_model_output(output);
    if let Some(code) = code {
        rig = rig.with_code(code.as_str());
    }
    Err(rig)
}

/// A content block as rig's: an image the providers take as a base64 image, anything else as
/// its text.
fn rig_block(block: &ContentBlock) -> ToolResultContent {
    match image(block) {
        Some((media_type, data)) => {
            ToolResultContent::image_base64(data, ImageMediaType::from_mime_type(media_type), None)
        }
        None => ToolResultContent::text(block_text(block)),
    }
}
