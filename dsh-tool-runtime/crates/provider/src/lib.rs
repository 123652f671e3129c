//! The model APIs' last mile for dsh-tools: a registry's tools as the tool entries of OpenAI's
//! Chat Completions and Responses APIs, Anthropic's Messages API and the Gemini API, the tool
//! calls of their answers (and streams) parsed, and the next request's messages built from the
//! results ([`provider`]); with feature `async-openai`, async-openai's types in and out, and with
//! feature `rig`, the registry's tools as rig tools.
//!
//! It depends on the core, `dsh-tool-runtime` (and, for a code-mode scope's view, on what code
//! mode sets in the registry); the `dsh-tools` facade re-exports it as `dsh_tools::provider`.
//! Depend on `dsh-tools` instead.
// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The core's modules under the paths this crate's code names them by.
use dsh_tool_runtime::*;

pub mod provider;
