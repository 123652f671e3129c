//! The model APIs' last mile: a registry's tools in a provider's request, the tool calls of its
//! answer, and the next request built from the results.
//!
//! Four wire APIs, as `serde_json::Value`s in the shapes their documentation gives (no HTTP
//! client, no provider SDK): [`Provider::OpenAiChat`] (Chat Completions), [`Provider::OpenAiResponses`]
//! (Responses), [`Provider::Anthropic`] (Messages) and [`Provider::Gemini`]
//! (`generateContent`). A [`ToolLoop`] binds a registry, a scope and a provider:
//!
//! - [`ToolLoop::tools`]: the request's `tools` field for the scope's [`Mode`](crate::Mode), the
//!   system text of code mode, and a [`StrictReport`] for every tool not sent in the provider's
//!   strict form;
//! - [`ToolLoop::parse`]: the calls of a response, each with an id, a name and its arguments, or
//!   the failure it ends with (malformed or truncated argument JSON, no id, no name);
//! - [`ToolLoop::step`]: runs the calls through [`Registry::execute_batch`] and returns the
//!   messages to append for the next request, each a [`Message`] that serializes to the
//!   provider's JSON: the model's own turn, one result per call in model
//!   order, images the provider does not take in a result as a user message after them, then the
//!   step's additional contexts as user messages (the order the reference agent loop uses).
//!
//! With feature `async-openai`, the same loop takes and gives async-openai's types
//! (`ToolLoop::chat_completion_tools`, `ToolLoop::step_chat_completion`,
//! `ToolLoop::response_tools`, `ToolLoop::step_response`).
//!
//! With feature `rig`, [`ToolLoop::rig_tools`] gives the scope's tools as rig tools whose every
//! call runs through the registry's pipeline.
//!
//! Streams are read with [`OpenAiChatStream`] and [`AnthropicStream`], which assemble the deltas
//! into the response a non-streamed request would have returned.
//!
//! # genai
//!
//! There is no adapter for the `genai` crate (0.7): its `reqwest` client is not optional (no
//! feature turns it off, and it brings tokio's multi-threaded runtime), so taking its types would
//! put an HTTP stack in every build that asks for them, which this layer is written not to need.
//! Its shapes do not fit a step either: its OpenAI adapter parses each call's argument JSON and
//! requires an id while reading the answer, so one malformed, truncated or id-less call fails the
//! whole response (where a step ends it in that call's error result), and its `ToolResponse` is
//! one string, with no failure flag (Anthropic's `is_error`) and no image. What genai does give
//! is the provider's own answer: with `ChatOptions::with_capture_raw_body(true)`, it is
//! `ChatResponse::captured_raw_body` (and the error's `response_body` when genai could not read
//! the answer), which [`ToolLoop::step`] takes.

#[cfg(feature = "async-openai")]
mod async_openai;
mod calls;
mod content;
mod message;
mod names;
mod results;
#[cfg(feature = "rig")]
mod rig;
mod step;
mod stream;
mod tools;

use std::collections::HashMap;

use serde_json::Value;

#[cfg(feature = "async-openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-openai")))]
pub use self::async_openai::TypedStep;
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub use self::rig::RigTools;
/// The async-openai crate whose types the typed methods take and give (types only).
#[cfg(feature = "async-openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-openai")))]
pub use ::async_openai as async_openai_types;
/// rig's agent runtime (`AgentBuilder::dynamic_tools` takes [`RigTools::tools`]).
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub use ::rig_agent;
/// rig's tool and model contracts, the version [`RigTools::tools`] are built with.
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub use ::rig_core;
pub use calls::{ParsedCall, ParsedResponse};
pub use message::Message;
pub use step::Step;
pub use stream::{AnthropicStream, OpenAiChatStream, StreamError, StreamLimits};
pub use tools::{ProviderTools, StrictReport};

use crate::registry::Registry;
use crate::scope::AgentId;

/// A model API whose requests and responses the layer reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), also spoken by llama.cpp, Ollama,
    /// vLLM and most OpenAI-compatible servers: `tools[].function`, `message.tool_calls`,
    /// `role: "tool"` results.
    OpenAiChat,
    /// OpenAI Responses (`POST /v1/responses`): `function` tools, `function_call` output items,
    /// `function_call_output` input items.
    OpenAiResponses,
    /// Anthropic Messages (`POST /v1/messages`): `input_schema`, `tool_use` blocks, `tool_result`
    /// blocks with `is_error`.
    Anthropic,
    /// Gemini `generateContent`: `functionDeclarations`, `functionCall` parts (an id is optional),
    /// `functionResponse` parts.
    Gemini,
}

impl Provider {
    /// Every provider, in declaration order.
    pub const ALL: [Provider; 4] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// Stable name: `openai-chat`, `openai-responses`, `anthropic`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai-chat",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why the layer could not do what was asked. Per-call problems are never errors: they become
/// that call's failure result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The scope's mode needs what the registry does not have (a code runtime for code mode).
    #[error("dsh-tools: cannot present the tools: {0}")]
    ModelView(String),
    /// The response is not of the provider's documented shape (e.g. a Chat Completions answer
    /// without `choices`, a Gemini answer without `candidates`).
    #[error("dsh-tools: not a {provider} response: {reason}")]
    Response {
        /// The provider whose shape was expected.
        provider: Provider,
        /// What is missing or of the wrong type.
        reason: String,
    },
    /// A typed adapter was used with a loop speaking another provider.
    #[error("dsh-tools: this adapter needs a {expected} loop, the loop speaks {found}")]
    WrongProvider {
        /// The provider the adapter speaks.
        expected: Provider,
        /// The loop's provider.
        found: Provider,
    },
    /// A value did not convert between the JSON the layer speaks and a client library's type
    /// (the serde error).
    #[error("dsh-tools: a value does not convert to or from the client library's type: {0}")]
    Types(String),
}

/// One registry, one scope, one provider: builds the tools of a request, reads the calls of a
/// response and runs a step. Cheap to clone.
///
/// Tool names the provider refuses (see [`ProviderTools::renamed`]) are sent renamed by
/// [`ToolLoop::tools`] and mapped back to the registry's tool when the model calls them.
///
/// Strict arguments are normalised back (`null` for an optional property becomes absent, see
/// [`normalize_strict_arguments`](crate::dialect::normalize_strict_arguments)) for the tools the
/// last [`ToolLoop::tools`] sent strict.
#[derive(Clone)]
pub struct ToolLoop {
    registry: Registry,
    scope: Option<AgentId>,
    provider: Provider,
    strict: bool,
    max_parallel: usize,
    /// Tools sent strict by the last `tools()`, with the schema their strict form came from.
    strict_schemas: HashMap<String, Value>,
    /// Names the last `tools()` sent renamed (the provider refuses the real one): sent -> real.
    renamed: HashMap<String, String>,
}

impl std::fmt::Debug for ToolLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolLoop")
            .field("scope", &self.scope)
            .field("provider", &self.provider)
            .field("strict", &self.strict)
            .field("max_parallel", &self.max_parallel)
            .finish_non_exhaustive()
    }
}

impl ToolLoop {
    /// A loop over `registry`'s tools as `scope` sees them (`None`: the root), speaking
    /// `provider`; strict mode on where the provider admits it, at most 10 bodies at once.
    pub fn new(registry: &Registry, scope: Option<AgentId>, provider: Provider) -> Self {
        ToolLoop {
            registry: registry.clone(),
            scope,
            provider,
            strict: true,
            max_parallel: 10,
            strict_schemas: HashMap::new(),
            renamed: HashMap::new(),
        }
    }

    /// `false` sends every tool non-strict (no report is written then).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Most bodies a step runs at once ([`BatchOptions::max_parallel`](crate::BatchOptions)).
    #[must_use]
    pub fn max_parallel(mut self, max_parallel: usize) -> Self {
        self.max_parallel = max_parallel;
        self
    }

    /// The provider this loop speaks.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The registry the calls run on.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The scope the calls run for.
    pub fn scope(&self) -> Option<&AgentId> {
        self.scope.as_ref()
    }
}
