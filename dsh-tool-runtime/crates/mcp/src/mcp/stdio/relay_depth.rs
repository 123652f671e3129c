//! How deep a message the transports hand to rmcp ([`MAX_RELAY_DEPTH`]), and the byte scan that
//! cuts every deeper subtree out of a line before anything parses it ([`cut_deep`]).

/// Deepest JSON-RPC message handed to rmcp; deeper subtrees are cut first. Below serde_json's
/// parse limit of 128, which rmcp parses with, and above
/// [`MAX_SCHEMA_DEPTH`](crate::mcp::MAX_SCHEMA_DEPTH) plus the JSON-RPC envelope, so the schema
/// check still sees (and refuses) a too-deep schema.
pub(in crate::mcp) const MAX_RELAY_DEPTH: usize = 100;

/// What replaces a subtree nested too deep.
pub(super) const TOO_DEEP: &str = "[nested too deep]";

/// `line` (one JSON text and its newline) with every array or object that opens at depth
/// [`MAX_RELAY_DEPTH`] (the outermost being depth 1) replaced by the string [`TOO_DEEP`]. A byte
/// scan that keeps strings intact and builds nothing: the cut subtrees are skipped unread, so the
/// cost is one pass whatever the depth. Text that is no JSON stays no JSON (rmcp ignores it).
pub(crate) fn cut_deep(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len().min(1 << 20));
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut skipping = false;
    for &byte in line {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth == MAX_RELAY_DEPTH && !skipping {
                        skipping = true;
                        out.extend_from_slice(b"\"");
                        out.extend_from_slice(TOO_DEEP.as_bytes());
                        out.extend_from_slice(b"\"");
                    }
                }
                b']' | b'}' => {
                    if depth == MAX_RELAY_DEPTH && skipping {
                        skipping = false;
                        depth -= 1;
                        continue;
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
        if !skipping {
            out.push(byte);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::json::text_depth;

    #[test]
    fn deep_lines_are_cut_below_the_relay_depth() {
        let levels = 5_000;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":{}1{}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        assert!(text_depth(line.as_bytes()) > levels);
        let flat = cut_deep(line.as_bytes());
        assert_eq!(text_depth(&flat), MAX_RELAY_DEPTH - 1);
        let parsed: Value = serde_json::from_slice(&flat).unwrap();
        assert_eq!(parsed["id"], 1);
        assert!(String::from_utf8(flat).unwrap().contains(TOO_DEEP));
        assert!(serde_json::from_slice::<Value>(&cut_deep(b"not json\n")).is_err());
    }

    /// Brackets and quotes inside strings neither open nor close anything, inside the cut
    /// subtree or out of it; what follows the cut stays.
    #[test]
    fn the_cut_keeps_strings_and_what_follows() {
        let levels = MAX_RELAY_DEPTH + 50;
        let line = format!(
            r#"{{"a":"[[{{\"","b":{}"]]\"}}",1{},"c":"}}]"}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        let cut = cut_deep(line.as_bytes());
        let parsed: Value = serde_json::from_slice(&cut).unwrap();
        assert_eq!(parsed["a"], "[[{\"");
        assert_eq!(parsed["c"], "}]");
        assert!(String::from_utf8(cut).unwrap().contains(TOO_DEEP));
    }
}
