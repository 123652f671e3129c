//! What the command prints: text from outside escaped for a terminal line, JSON made readable.

use serde_json::Value;

/// `text` ready for one terminal line: its control characters (general category Cc: ESC, CR,
/// newlines, …) and format characters (Cf: bidi overrides and isolates, zero-width spaces and
/// joiners, the byte order mark, …) escaped as `\u{1b}`, `\u{202e}`. Text from outside (a
/// journal, an MCP server, an authorization server) thus never drives the terminal nor reorders
/// or hides what is shown. Every line printed from outside text goes through here.
pub(crate) fn escaped(text: &str) -> String {
    use unicode_general_category::{GeneralCategory, get_general_category};
    text.chars()
        .map(|c| match get_general_category(c) {
            GeneralCategory::Control | GeneralCategory::Format => c.escape_default().to_string(),
            _ => c.to_string(),
        })
        .collect()
}

/// `value` as indented JSON.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}
