//! The provider layer: tools out, calls in (responses and streams), results out and one step,
//! for OpenAI Chat Completions and Responses, Anthropic Messages and Gemini.

#[cfg(feature = "async-openai")]
mod async_openai;
#[path = "../corpus/mod.rs"]
mod corpus;
mod example;
mod names;
mod responses;
#[cfg(feature = "rig")]
mod rig;
mod sdk_types;
mod streams;
mod support;
mod tools_out;
