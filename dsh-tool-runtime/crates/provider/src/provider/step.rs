//! One step: a response's calls run through the pipeline, and the next request's messages.

use serde_json::Value;

use super::calls::{CallRecord, calls, view};
use super::results::next_messages;
use super::{Message, ParsedCall, Provider, ProviderError, ToolLoop};
use crate::call::ToolCall;
use crate::dialect::normalize_strict_arguments;
use crate::result::ToolResult;
use crate::schedule::BatchOptions;
use tokio_util::sync::CancellationToken;

/// What one [`ToolLoop::step`] did.
#[derive(Debug, Clone)]
pub struct Step {
    /// The model's text beside its calls.
    pub text: String,
    /// One result per call, in model order.
    pub results: Vec<ToolResult>,
    /// The messages to append to the conversation (see [`ToolLoop::next_messages`]): the
    /// model's turn first, which [`Step::calls`] reads the calls from.
    pub messages: Vec<Message>,
    /// `true` when the loop should stop: the model made no call (its text is the answer), or a
    /// call's body concluded the turn.
    pub done: bool,
    provider: Provider,
    /// Where each call is in the model's turn (the first messages of `messages`).
    records: Vec<CallRecord>,
}

impl Step {
    /// The calls, in model order (one per result), borrowed from the model's turn at the start
    /// of [`Step::messages`]: a part of it changed or removed since reads as what is there now.
    pub fn calls(&self) -> Vec<ParsedCall<'_>> {
        calls(self.provider, &self.messages, &self.records)
    }
}

impl ToolLoop {
    /// One step of an agent loop: reads the calls of `response`, runs the runnable ones with
    /// [`Registry::execute_batch`](crate::Registry::execute_batch) for the loop's scope (each
    /// ends in exactly one result; a call that cannot run ends in its [`ParsedCall::error`]
    /// without reaching the pipeline), and builds the next request's messages.
    ///
    /// Arguments of tools the last [`ToolLoop::tools`] sent strict are normalised back first
    /// (an optional property sent as `null` becomes absent).
    ///
    /// `response` is taken as [`ToolLoop::parse`] takes it: the model's turn in
    /// [`Step::messages`] is moved out of it, not copied, and each call's parsed arguments are
    /// moved into the pipeline.
    ///
    /// # Errors
    /// [`ProviderError::Response`] when `response` is not of the provider's shape; no call has
    /// run then.
    pub async fn step(&self, response: Value) -> Result<Step, ProviderError> {
        self.step_with_signal(response, CancellationToken::new())
            .await
    }

    /// [`ToolLoop::step`] with the step's cancellation signal: once it fires nothing new starts,
    /// started calls drain, the rest end `ABORTED_BEFORE_DISPATCH`.
    ///
    /// # Errors
    /// As [`ToolLoop::step`].
    pub async fn step_with_signal(
        &self,
        response: Value,
        signal: CancellationToken,
    ) -> Result<Step, ProviderError> {
        let (text, assistant, mut records) = self.parse(response)?.into_parts();
        let (results, reply_ids) = self.execute(&assistant, &mut records, signal).await;
        let messages = next_messages(self.provider, assistant, &records, &results, reply_ids);
        let done = records.is_empty()
            || results.iter().any(|result| {
                matches!(
                    result,
                    ToolResult::Success {
                        concludes_turn: true,
                        ..
                    }
                )
            });
        Ok(Step {
            text,
            results,
            messages,
            done,
            provider: self.provider,
            records,
        })
    }

    /// One result per call, in order: the runnable calls through one batch (their parsed
    /// arguments moved out of `records`), the others their parse failure. With them, for the
    /// OpenAI APIs, the id each result is sent under (one per call), read here once.
    async fn execute(
        &self,
        turn: &[Value],
        records: &mut [CallRecord],
        signal: CancellationToken,
    ) -> (Vec<ToolResult>, Vec<String>) {
        // Sized once: a call is large, and growing the list would copy every call made so far.
        let mut runnable = Vec::with_capacity(records.len());
        let openai = matches!(
            self.provider,
            Provider::OpenAiChat | Provider::OpenAiResponses
        );
        let mut reply_ids = Vec::with_capacity(if openai { records.len() } else { 0 });
        for record in records.iter_mut() {
            let arguments = record.arguments.take();
            let call = view(self.provider, turn, record);
            if openai {
                reply_ids.push(call.id.to_owned());
            }
            let Some(arguments) = arguments else {
                continue;
            };
            // Only a `null` can need normalising, and most calls have none: the strict schema
            // is looked up only then.
            let strict = has_null(&arguments)
                .then(|| self.strict_schemas.get(call.name))
                .flatten();
            let arguments = match strict {
                Some(schema) => normalize_strict_arguments(schema, arguments),
                None => arguments,
            };
            runnable.push(ToolCall::new(call.id, call.name, arguments));
        }
        let options = BatchOptions {
            max_parallel: self.max_parallel,
            signal,
        };
        let ran = self
            .registry
            .execute_batch(self.scope.as_ref(), runnable, options)
            .await;
        // Every call ran (the common case): the batch's results are the step's.
        if ran.len() == records.len() {
            return (ran, reply_ids);
        }
        let mut ran = ran.into_iter();
        let results = records
            .iter()
            .map(|record| match record.error() {
                Some(error) => ToolResult::failure(error.clone()),
                None => ran.next().unwrap_or_else(|| {
                    ToolResult::coded_failure(
                        crate::ErrorCode::AbortedBeforeDispatch,
                        "tool call aborted before dispatch",
                    )
                }),
            })
            .collect();
        (results, reply_ids)
    }
}

/// `true` when a `null` appears anywhere in `value` (iterative, as arguments may be deep; only
/// nested containers are stacked, so flat arguments are checked without allocating).
pub(crate) fn has_null(value: &Value) -> bool {
    let mut stack = Vec::new();
    let mut node = Some(value);
    while let Some(current) = node {
        let found = match current {
            Value::Null => true,
            Value::Array(items) => scan(items.iter(), &mut stack),
            Value::Object(map) => scan(map.values(), &mut stack),
            _ => false,
        };
        if found {
            return true;
        }
        node = stack.pop();
    }
    false
}

/// `true` when one of `children` is `null`; the containers among them are pushed on `stack`.
fn scan<'a>(children: impl Iterator<Item = &'a Value>, stack: &mut Vec<&'a Value>) -> bool {
    for child in children {
        match child {
            Value::Null => return true,
            Value::Array(_) | Value::Object(_) => stack.push(child),
            _ => {}
        }
    }
    false
}
