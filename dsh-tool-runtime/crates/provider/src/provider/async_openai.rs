//! async-openai's request and response types in and out of a [`ToolLoop`] (feature
//! `async-openai`): its Chat Completions and Responses types, converted through their serde
//! forms (the wire JSON both sides are written against).

use ::async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionTools, CreateChatCompletionResponse,
};
use ::async_openai::types::responses::{InputItem, Response, Tool};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Message, Provider, ProviderError, Step, ToolLoop};

/// A [`Step`] whose next messages are also in a client library's own type.
#[derive(Debug, Clone)]
pub struct TypedStep<M> {
    /// The step, its messages as JSON included.
    pub step: Step,
    /// The same messages in the library's type, in order.
    pub messages: Vec<M>,
}

impl ToolLoop {
    /// [`ToolLoop::tools`] as async-openai's Chat Completions tools, for
    /// `CreateChatCompletionRequest::tools`; also the code-mode system text.
    ///
    /// # Errors
    /// [`ProviderError::WrongProvider`] unless the loop speaks [`Provider::OpenAiChat`], and the
    /// errors of [`ToolLoop::tools`].
    pub fn chat_completion_tools(
        &mut self,
    ) -> Result<(Vec<ChatCompletionTools>, Option<String>), ProviderError> {
        self.expect(Provider::OpenAiChat)?;
        let out = self.tools()?;
        Ok((
            typed(out.tools.as_array().into_iter().flatten())?,
            out.system,
        ))
    }

    /// [`ToolLoop::tools`] as async-openai's Responses tools, for `CreateResponse::tools`; also
    /// the code-mode system text (for `instructions`).
    ///
    /// # Errors
    /// [`ProviderError::WrongProvider`] unless the loop speaks [`Provider::OpenAiResponses`], and
    /// the errors of [`ToolLoop::tools`].
    pub fn response_tools(&mut self) -> Result<(Vec<Tool>, Option<String>), ProviderError> {
        self.expect(Provider::OpenAiResponses)?;
        let out = self.tools()?;
        Ok((
            typed(out.tools.as_array().into_iter().flatten())?,
            out.system,
        ))
    }

    /// [`ToolLoop::step`] over async-openai's Chat Completions response; the next messages come
    /// back as its request messages.
    ///
    /// # Errors
    /// [`ProviderError::WrongProvider`], [`ProviderError::Types`] when a value does not convert,
    /// and the errors of [`ToolLoop::step`].
    pub async fn step_chat_completion(
        &self,
        response: &CreateChatCompletionResponse,
    ) -> Result<TypedStep<ChatCompletionRequestMessage>, ProviderError> {
        self.expect(Provider::OpenAiChat)?;
        self.typed_step(response).await
    }

    /// [`ToolLoop::step`] over async-openai's Responses response; the next input items come
    /// back as its `InputItem`s.
    ///
    /// # Errors
    /// As [`ToolLoop::step_chat_completion`].
    pub async fn step_response(
        &self,
        response: &Response,
    ) -> Result<TypedStep<InputItem>, ProviderError> {
        self.expect(Provider::OpenAiResponses)?;
        self.typed_step(response).await
    }

    fn expect(&self, provider: Provider) -> Result<(), ProviderError> {
        if self.provider == provider {
            Ok(())
        } else {
            Err(ProviderError::WrongProvider {
                expected: provider,
                found: self.provider,
            })
        }
    }

    async fn typed_step<R: Serialize, M: DeserializeOwned>(
        &self,
        response: &R,
    ) -> Result<TypedStep<M>, ProviderError> {
        let response = serde_json::to_value(response).map_err(types_error)?;
        let step = self.step(response).await?;
        let messages = step
            .messages
            .iter()
            .map(|message| match message {
                Message::Json(value) => M::deserialize(value),
                // A typed message is read through its JSON (the fields async-openai's types take).
                typed => M::deserialize(typed.to_value()),
            })
            .collect::<Result<_, _>>()
            .map_err(types_error)?;
        Ok(TypedStep { step, messages })
    }
}

fn typed<'a, T: DeserializeOwned>(
    values: impl IntoIterator<Item = &'a Value>,
) -> Result<Vec<T>, ProviderError> {
    values
        .into_iter()
        .map(|value| T::deserialize(value).map_err(types_error))
        .collect()
}

fn types_error(error: serde_json::Error) -> ProviderError {
    ProviderError::Types(error.to_string())
}
