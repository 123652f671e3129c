//! Result shapes of a tool call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ErrorCode, ToolError};

/// One block of model-facing content.
///
/// JSON is not a block: structured values are rendered to text (pretty JSON by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// MIME type such as `image/png`.
        media_type: String,
        /// Base64 (standard alphabet, padded) of the image bytes.
        data: String,
    },
    /// A sound clip, base64-encoded (MCP `AudioContent`, protocol 2025-03-26 on).
    Audio {
        /// MIME type such as `audio/wav`.
        media_type: String,
        /// Base64 (standard alphabet, padded) of the audio bytes.
        data: String,
    },
    /// A resource embedded whole in the result (MCP `EmbeddedResource`): the contents a
    /// `resources/read` of `uri` would return, without the client having to read it.
    Resource {
        /// The resource's URI, e.g. `file:///notes.txt` or `test://report`.
        uri: String,
        /// Its MIME type, when known (e.g. `text/plain`, `application/json`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        /// Its contents: text, or base64 of its bytes.
        contents: ResourceContents,
    },
}

/// The contents of an embedded resource ([`ContentBlock::Resource`]): serialized as
/// `{"text": "…"}` or `{"blob": "<base64>"}`, the two forms of MCP `ResourceContents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceContents {
    /// Text contents.
    Text(String),
    /// Binary contents, base64 (standard alphabet, padded).
    Blob(String),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// An embedded text resource: `uri`, its MIME type and its text.
    pub fn text_resource(
        uri: impl Into<String>,
        media_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ContentBlock::Resource {
            uri: uri.into(),
            media_type: Some(media_type.into()),
            contents: ResourceContents::Text(text.into()),
        }
    }

    /// The block's kind as MCP names it: `text`, `image`, `audio` or `resource`.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image { .. } => "image",
            ContentBlock::Audio { .. } => "audio",
            ContentBlock::Resource { .. } => "resource",
        }
    }
}

/// Where an additional context came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSource {
    /// Who produced it: `tool`, `hook`, `plugin`, …
    pub kind: String,
    /// The producer's name (tool name, plugin name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A short summary for UIs, e.g. `grep × 3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A user-role message the agent loop appends after the step's tool results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdditionalContext {
    /// The message content.
    pub content: Vec<ContentBlock>,
    /// Who produced it.
    pub source: ContextSource,
}

impl AdditionalContext {
    /// A one-text-block context from `source_kind`.
    pub fn text(source_kind: impl Into<String>, text: impl Into<String>) -> Self {
        AdditionalContext {
            content: vec![ContentBlock::text(text)],
            source: ContextSource {
                kind: source_kind.into(),
                name: None,
                summary: None,
            },
        }
    }
}

/// `{ name, code }` of a coded failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Error name, e.g. `ToolArgsError`.
    pub name: String,
    /// Wire code, e.g. `INVALID_ARGS`.
    pub code: String,
}

/// The structured error of a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// The message (the model sees `Error: <message>`).
    pub message: String,
    /// Present for coded errors only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<ErrorInfo>,
}

impl ToolFailure {
    /// A failure with one of the runtime's codes.
    pub fn coded(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolFailure {
            message: message.into(),
            info: Some(ErrorInfo {
                name: code.error_name().to_owned(),
                code: code.as_str().to_owned(),
            }),
        }
    }

    /// A failure with a message only (denials).
    pub fn plain(message: impl Into<String>) -> Self {
        ToolFailure {
            message: message.into(),
            info: None,
        }
    }

    /// The code, parsed.
    pub fn code(&self) -> Option<ErrorCode> {
        self.info
            .as_ref()
            .map(|info| ErrorCode::from_wire(&info.code))
    }
}

impl From<ToolError> for ToolFailure {
    fn from(err: ToolError) -> Self {
        let info = match (err.name(), err.code()) {
            (Some(name), Some(code)) => Some(ErrorInfo {
                name: name.to_owned(),
                code: code.to_owned(),
            }),
            _ => None,
        };
        ToolFailure {
            message: err.message().to_owned(),
            info,
        }
    }
}

/// The outcome of one tool call. Every call ends in exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
// Closed on purpose: every call ends in exactly one of the two.
pub enum ToolResult {
    /// The body returned a value that passed the output schema.
    Success {
        /// The canonical JSON value (returned to direct callers and code-mode bindings).
        value: Value,
        /// Model-facing content, rendered from `value` or replaced by a post-execute hook.
        content: Vec<ContentBlock>,
        /// Replayable presentation metadata (top-level calls only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        /// Contexts deferred by the body and added by hooks, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        additional_contexts: Vec<AdditionalContext>,
        /// The body called `conclude_turn()`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        concludes_turn: bool,
    },
    /// The call failed; it never has a value.
    Failure {
        /// The structured error.
        error: ToolFailure,
        /// Model-facing content: `Error: <message>` unless a hook or wrapper authored it.
        content: Vec<ContentBlock>,
        /// Replayable presentation metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        /// Contexts that survive the failure.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        additional_contexts: Vec<AdditionalContext>,
    },
}

impl ToolResult {
    /// A failure whose content is the standard `Error: <message>` text block.
    pub fn failure(error: ToolFailure) -> Self {
        let content = vec![ContentBlock::text(format!("Error: {}", error.message))];
        ToolResult::Failure {
            error,
            content,
            meta: None,
            additional_contexts: Vec::new(),
        }
    }

    /// A coded failure with the standard content.
    pub fn coded_failure(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolResult::failure(ToolFailure::coded(code, message))
    }

    /// A success with the given value and content.
    pub fn success(value: Value, content: Vec<ContentBlock>) -> Self {
        ToolResult::Success {
            value,
            content,
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    /// `true` for [`ToolResult::Failure`].
    pub fn is_error(&self) -> bool {
        matches!(self, ToolResult::Failure { .. })
    }

    /// The value of a success.
    pub fn value(&self) -> Option<&Value> {
        match self {
            ToolResult::Success { value, .. } => Some(value),
            ToolResult::Failure { .. } => None,
        }
    }

    /// The error of a failure.
    pub fn error(&self) -> Option<&ToolFailure> {
        match self {
            ToolResult::Failure { error, .. } => Some(error),
            ToolResult::Success { .. } => None,
        }
    }

    /// The error code of a coded failure.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.error().and_then(ToolFailure::code)
    }

    /// Model-facing content.
    pub fn content(&self) -> &[ContentBlock] {
        match self {
            ToolResult::Success { content, .. } | ToolResult::Failure { content, .. } => content,
        }
    }

    /// Mutable model-facing content.
    pub fn content_mut(&mut self) -> &mut Vec<ContentBlock> {
        match self {
            ToolResult::Success { content, .. } | ToolResult::Failure { content, .. } => content,
        }
    }

    /// Additional contexts.
    pub fn additional_contexts(&self) -> &[AdditionalContext] {
        let (ToolResult::Success {
            additional_contexts,
            ..
        }
        | ToolResult::Failure {
            additional_contexts,
            ..
        }) = self;
        additional_contexts
    }

    /// Mutable additional contexts.
    pub fn additional_contexts_mut(&mut self) -> &mut Vec<AdditionalContext> {
        let (ToolResult::Success {
            additional_contexts,
            ..
        }
        | ToolResult::Failure {
            additional_contexts,
            ..
        }) = self;
        additional_contexts
    }

    /// The content's text blocks joined by `\n` (other blocks as `[<kind> content]`).
    pub fn text(&self) -> String {
        blocks_text(self.content())
    }
}

/// Text blocks joined by `\n`; a non-text block reads `[<type> content]`.
pub fn blocks_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            other => format!("[{} content]", other.kind()),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
