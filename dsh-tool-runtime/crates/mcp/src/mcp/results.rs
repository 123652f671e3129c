//! From a `tools/call` answer to a tool value and model content.

use rmcp::model::{CallToolResult, ContentBlock as McpBlock, TextContent};
use serde_json::{Map, Value};

use crate::annotations::ToolAnnotations;
use crate::presentation::{CallView, ToolCallKind};
use crate::result::ContentBlock;

/// The canonical value of a call: `{content: <raw MCP blocks>, structuredContent?}`.
pub(crate) fn canonical_value(mut result: Map<String, Value>) -> Value {
    let mut value = Map::new();
    let content = match result.remove("content") {
        Some(Value::Array(blocks)) => Value::Array(blocks),
        // The legacy `toolResult` shape carries one value instead of blocks.
        _ => match result.get("toolResult") {
            Some(legacy) => Value::Array(vec![serde_json::json!({
                "type": "text",
                "text": legacy_text(legacy),
            })]),
            None => Value::Array(Vec::new()),
        },
    };
    value.insert("content".to_owned(), content);
    if let Some(structured) = result.remove("structuredContent") {
        value.insert("structuredContent".to_owned(), structured);
    }
    Value::Object(value)
}

/// [`canonical_value`] of a result rmcp has already typed, without serialising it whole: a
/// plain text block (the common answer) is built directly, any other block through serde.
pub(crate) fn typed_value(result: CallToolResult) -> serde_json::Result<Value> {
    let mut blocks = Vec::with_capacity(result.content.len());
    for block in result.content {
        blocks.push(match block {
            McpBlock::Text(TextContent {
                text,
                meta: None,
                annotations: None,
                ..
            }) => {
                let mut map = Map::with_capacity(2);
                map.insert("type".to_owned(), Value::String("text".to_owned()));
                map.insert("text".to_owned(), Value::String(text));
                Value::Object(map)
            }
            other => serde_json::to_value(other)?,
        });
    }
    let mut value = Map::with_capacity(2);
    value.insert("content".to_owned(), Value::Array(blocks));
    if let Some(structured) = result.structured_content {
        value.insert("structuredContent".to_owned(), structured);
    }
    Ok(Value::Object(value))
}

fn legacy_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `true` when the server flagged the result as a tool error (`isError: true`).
pub(crate) fn is_error(result: &Map<String, Value>) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

/// `map[key]`; a content block has a handful of keys, which a scan finds sooner than a hash.
fn field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() <= 8 {
        map.iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    } else {
        map.get(key)
    }
}

fn str_field<'a>(block: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    field(block, key).and_then(Value::as_str)
}

/// The text a non-image block reads as, or `None` for an image.
fn describe(block: &Value) -> Option<String> {
    let Value::Object(block) = block else {
        return Some("[invalid content block: not an object]".to_owned());
    };
    let kind = str_field(block, "type").unwrap_or("");
    Some(match kind {
        "text" => str_field(block, "text").unwrap_or("").to_owned(),
        "image" if str_field(block, "data").is_some() => return None,
        "resource_link" => format!(
            "Resource link: {} ({})",
            str_field(block, "name").unwrap_or("unnamed"),
            str_field(block, "uri").unwrap_or("no uri")
        ),
        "resource" => {
            let resource = block.get("resource").and_then(Value::as_object);
            let field = |key| resource.and_then(|r| str_field(r, key));
            match (field("uri"), field("text")) {
                (Some(uri), Some(text)) => format!("[embedded resource {uri}]\n{text}"),
                (uri, None) => format!(
                    "[embedded resource {} ({}), binary content not shown]",
                    uri.unwrap_or("without uri"),
                    field("mimeType").unwrap_or("unknown type")
                ),
                (None, Some(text)) => format!("[embedded resource]\n{text}"),
            }
        }
        "audio" => format!(
            "[audio content ({}) not shown]",
            str_field(block, "mimeType").unwrap_or("unknown type")
        ),
        other => format!("[unsupported content block type \"{other}\"]"),
    })
}

/// Model content for a call's blocks: consecutive text-like blocks joined by `\n` into one text
/// block, images as image blocks; `(<raw> returned no model-visible content)` when empty.
pub(crate) fn render(raw_name: &str, value: &Value) -> Vec<ContentBlock> {
    let blocks = value
        .as_object()
        .and_then(|value| field(value, "content"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::with_capacity(1);
    // The text run being joined; most answers are one text block, which stays as it is.
    let mut run: Option<String> = None;
    for block in blocks {
        match describe(block) {
            Some(text) => match &mut run {
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(&text);
                }
                None => run = Some(text),
            },
            None => {
                if let Some(joined) = run.take() {
                    out.push(ContentBlock::text(joined));
                }
                out.push(ContentBlock::Image {
                    media_type: block
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream")
                        .to_owned(),
                    data: block
                        .get("data")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
        }
    }
    if let Some(joined) = run {
        out.push(ContentBlock::text(joined));
    }
    if out
        .iter()
        .all(|block| matches!(block, ContentBlock::Text { text } if text.is_empty()))
    {
        return vec![ContentBlock::text(format!(
            "({raw_name} returned no model-visible content)"
        ))];
    }
    out
}

/// The text of a failed call (`isError: true`): its rendered text blocks, without the `Error: `
/// a server (this crate's among them) starts a failure's text with, since the failure this text
/// becomes is shown with one (`Error: Error: …` otherwise).
pub(crate) fn error_text(raw_name: &str, value: &Value) -> String {
    let texts: Vec<String> = render(raw_name, value)
        .into_iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return format!("({raw_name} returned no model-visible content)");
    }
    let text = texts.join("\n");
    match text.strip_prefix("Error: ") {
        Some(rest) if !rest.is_empty() => rest.to_owned(),
        _ => text,
    }
}

/// The pending-state card of an MCP tool call: a generic card titled by the server's
/// `annotations.title` (else the raw name), its kind read from the behaviour hints (`readOnlyHint`
/// ⇒ read, or fetch when also `openWorldHint`; `destructiveHint` ⇒ delete; otherwise other), the
/// arguments as raw input.
pub(crate) fn call_card(
    raw_name: &str,
    annotations: Option<&ToolAnnotations>,
    args: &Value,
) -> CallView {
    let hint =
        |pick: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(pick) == Some(true);
    let kind = if hint(|a| a.read_only_hint) {
        if hint(|a| a.open_world_hint) {
            ToolCallKind::Fetch
        } else {
            ToolCallKind::Read
        }
    } else if hint(|a| a.destructive_hint) {
        ToolCallKind::Delete
    } else {
        ToolCallKind::Other
    };
    let title = annotations
        .and_then(|a| a.title.as_deref())
        .filter(|title| !title.trim().is_empty())
        .unwrap_or(raw_name);
    CallView::Generic {
        title: title.to_owned(),
        kind,
        raw_input: Some(args.clone()),
        content: Vec::new(),
        locations: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn call_cards_follow_the_title_and_the_behaviour_hints() {
        let args = json!({"path": "a"});
        let card = |annotations: Option<ToolAnnotations>| match call_card(
            "read-it",
            annotations.as_ref(),
            &args,
        ) {
            CallView::Generic {
                title,
                kind,
                raw_input,
                ..
            } => {
                assert_eq!(raw_input.as_ref(), Some(&args));
                (title, kind)
            }
            other => panic!("not generic: {other:?}"),
        };
        assert_eq!(card(None), ("read-it".to_owned(), ToolCallKind::Other));
        let mut read = ToolAnnotations::default();
        read.title = Some("Read a file".into());
        read.read_only_hint = Some(true);
        assert_eq!(
            card(Some(read.clone())),
            ("Read a file".to_owned(), ToolCallKind::Read)
        );
        let mut fetch = read;
        fetch.open_world_hint = Some(true);
        assert_eq!(card(Some(fetch)).1, ToolCallKind::Fetch);
        let mut delete = ToolAnnotations::default();
        delete.title = Some("  ".into());
        delete.destructive_hint = Some(true);
        assert_eq!(
            card(Some(delete)),
            ("read-it".to_owned(), ToolCallKind::Delete)
        );
    }

    #[test]
    fn text_runs_join_and_images_split_them() {
        let value = json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b"},
            {"type": "image", "data": "AAA=", "mimeType": "image/png"},
            {"type": "resource_link", "name": "readme", "uri": "file:///r"},
            {"type": "resource", "resource": {"uri": "mem://x", "text": "body"}},
            {"type": "resource", "resource": {"uri": "mem://y", "blob": "AA==", "mimeType": "image/gif"}},
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
            {"type": "hologram"},
            7
        ]});
        let content = render("t", &value);
        assert_eq!(content.len(), 3);
        assert_eq!(content[0], ContentBlock::text("a\nb"));
        assert_eq!(
            content[1],
            ContentBlock::Image {
                media_type: "image/png".into(),
                data: "AAA=".into()
            }
        );
        assert_eq!(
            content[2],
            ContentBlock::text(
                "Resource link: readme (file:///r)\n[embedded resource mem://x]\nbody\n\
                 [embedded resource mem://y (image/gif), binary content not shown]\n\
                 [audio content (audio/wav) not shown]\n\
                 [unsupported content block type \"hologram\"]\n\
                 [invalid content block: not an object]"
            )
        );
    }

    #[test]
    fn a_failure_text_loses_the_servers_error_prefix_once() {
        let failed =
            |text: &str| json!({"content": [{"type": "text", "text": text}], "isError": true});
        assert_eq!(error_text("rm", &failed("Error: disk full")), "disk full");
        assert_eq!(error_text("rm", &failed("Error: Error: x")), "Error: x");
        assert_eq!(error_text("rm", &failed("disk full")), "disk full");
        assert_eq!(error_text("rm", &failed("Error: ")), "Error: ");
    }

    #[test]
    fn empty_content_says_so() {
        assert_eq!(
            render("echo", &json!({"content": []})),
            vec![ContentBlock::text(
                "(echo returned no model-visible content)"
            )]
        );
        assert_eq!(
            error_text("echo", &json!({"content": []})),
            "(echo returned no model-visible content)"
        );
    }

    #[test]
    fn canonical_value_keeps_blocks_and_structured_content() {
        let result = json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": 1},
            "isError": false, "_meta": {}});
        let Value::Object(result) = result else {
            unreachable!()
        };
        assert!(!is_error(&result));
        assert_eq!(
            canonical_value(result),
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": 1}})
        );
        let Value::Object(legacy) = json!({"toolResult": {"ok": true}}) else {
            unreachable!()
        };
        assert_eq!(
            canonical_value(legacy),
            json!({"content": [{"type": "text", "text": "{\"ok\":true}"}]})
        );
    }

    #[test]
    fn a_typed_result_reads_as_its_wire_form_does() {
        let wire = json!({"content": [{"type": "text", "text": "x"},
            {"type": "text", "text": "y", "annotations": {"priority": 0.5}, "_meta": {"k": 1}},
            {"type": "image", "data": "AA==", "mimeType": "image/png"}],
            "structuredContent": {"n": 1}, "isError": true});
        let typed: CallToolResult = serde_json::from_value(wire.clone()).unwrap();
        let Value::Object(wire) = serde_json::to_value(&typed).unwrap() else {
            unreachable!()
        };
        assert_eq!(typed_value(typed).unwrap(), canonical_value(wire));
        let bare: CallToolResult = serde_json::from_value(json!({"content": []})).unwrap();
        assert_eq!(typed_value(bare).unwrap(), json!({"content": []}));
    }
}
