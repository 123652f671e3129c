//! Content blocks in a provider's wire form: text, and images where the provider takes them.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::Provider;
use crate::result::{ContentBlock, ResourceContents};

/// Image media types every provider's image input accepts (Anthropic's list is the narrowest).
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// A block as text: text itself, an embedded text resource's text, and a bracketed note for what
/// has no text form (`[audio content]`, an image of a type the providers do not take).
pub(crate) fn block_text(block: &ContentBlock) -> Cow<'_, str> {
    match block {
        ContentBlock::Text { text } => Cow::Borrowed(text.as_str()),
        ContentBlock::Resource {
            uri,
            contents: ResourceContents::Text(text),
            ..
        } => Cow::Owned(format!("[resource {uri}]\n{text}")),
        ContentBlock::Resource { uri, .. } => {
            Cow::Owned(format!("[resource {uri}: binary content]"))
        }
        other => Cow::Owned(format!("[{} content]", other.kind())),
    }
}

/// The image of a block, `(media type, base64)`, when it is one the providers accept.
pub(crate) fn image(block: &ContentBlock) -> Option<(&str, &str)> {
    match block {
        ContentBlock::Image { media_type, data } if IMAGE_TYPES.contains(&media_type.as_str()) => {
            Some((media_type, data))
        }
        _ => None,
    }
}

/// The text of blocks that are not images (joined by `\n`), and the images.
pub(crate) fn split(blocks: &[ContentBlock]) -> (String, Vec<(&str, &str)>) {
    // Most results are one text block.
    if let [ContentBlock::Text { text }] = blocks {
        return (text.clone(), Vec::new());
    }
    let mut text = String::new();
    let mut texts = 0usize;
    let mut images = Vec::new();
    for block in blocks {
        match image(block) {
            Some(found) => images.push(found),
            None => {
                if texts > 0 {
                    text.push('\n');
                }
                texts += 1;
                text.push_str(&block_text(block));
            }
        }
    }
    (text, images)
}

/// One image as a part of a user message, in `provider`'s form.
pub(crate) fn image_part(provider: Provider, media_type: &str, data: &str) -> Value {
    match provider {
        Provider::OpenAiChat => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{media_type};base64,{data}")},
        }),
        Provider::OpenAiResponses => json!({
            "type": "input_image",
            "image_url": format!("data:{media_type};base64,{data}"),
            "detail": "auto",
        }),
        Provider::Anthropic => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        Provider::Gemini => json!({"inlineData": {"mimeType": media_type, "data": data}}),
    }
}

/// One text as a part of a user message, in `provider`'s form.
pub(crate) fn text_part(provider: Provider, text: &str) -> Value {
    match provider {
        Provider::OpenAiChat | Provider::Anthropic => json!({"type": "text", "text": text}),
        Provider::OpenAiResponses => json!({"type": "input_text", "text": text}),
        Provider::Gemini => json!({"text": text}),
    }
}

/// Blocks as the parts of a user message: texts and images in order, empty texts left out
/// (Anthropic rejects an empty text block).
pub(crate) fn parts(provider: Provider, blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match image(block) {
            Some((media_type, data)) => Some(image_part(provider, media_type, data)),
            None => {
                let text = block_text(block);
                (!text.is_empty()).then(|| text_part(provider, &text))
            }
        })
        .collect()
}

/// A user message holding `parts`, in `provider`'s form.
pub(crate) fn user_message(provider: Provider, parts: Vec<Value>) -> Value {
    match provider {
        Provider::OpenAiChat | Provider::Anthropic => json!({"role": "user", "content": parts}),
        Provider::OpenAiResponses => json!({"type": "message", "role": "user", "content": parts}),
        Provider::Gemini => json!({"role": "user", "parts": parts}),
    }
}
