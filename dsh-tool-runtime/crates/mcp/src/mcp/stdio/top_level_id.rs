//! The top-level `"id"` of a JSON-RPC message read in pieces, without keeping its text: how the
//! stdout guard finds the request an oversized or unreadable line answers.

use serde_json::Value;

/// Finds the top-level `"id"` of a JSON object streamed through [`TopLevelId::feed`] without
/// keeping the text: a byte scan that tracks strings and nesting, and keeps only the keys and the
/// `id` value at the top level (a number or a string, at most [`TopLevelId::MAX_ID`] bytes). It
/// reads the id a JSON parser would: keys with their escapes decoded, the last of repeated ones.
#[derive(Default)]
pub(super) struct TopLevelId {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The top-level string being read (a key or a value), while short enough to matter.
    text: Vec<u8>,
    /// The last top-level key read, and whether a `:` followed it.
    key: Vec<u8>,
    after_colon: bool,
    /// The raw text of the `id` value, once read.
    raw: Vec<u8>,
    reading_id: bool,
    done: bool,
}

impl TopLevelId {
    const MAX_ID: usize = 256;

    pub(super) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.in_string {
                if self.depth == 1 && self.text.len() <= Self::MAX_ID {
                    self.text.push(byte);
                }
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => {
                        self.in_string = false;
                        if self.depth == 1 {
                            self.string_ended();
                        }
                    }
                    _ => {}
                }
                continue;
            }
            if self.reading_id && self.depth == 1 {
                match byte {
                    b',' | b'}' => {
                        self.reading_id = false;
                        self.done = true;
                    }
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    _ if self.raw.len() <= Self::MAX_ID => self.raw.push(byte),
                    _ => {}
                }
            }
            match byte {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 {
                        self.text.clear();
                        self.text.push(byte);
                    }
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b':' if self.depth == 1 => {
                    self.after_colon = true;
                    // The key as a parser reads it (`"\u0069d"` is `id` too); a repeated `id`
                    // replaces the earlier one, as it does for serde_json.
                    if serde_json::from_slice::<String>(&self.key).is_ok_and(|key| key == "id") {
                        self.raw.clear();
                        self.reading_id = true;
                    }
                }
                b',' if self.depth == 1 => self.after_colon = false,
                _ => {}
            }
        }
    }

    /// A top-level string closed: a key when no `:` is pending, else a value (the id's, if
    /// that is what is being read).
    fn string_ended(&mut self) {
        if self.reading_id {
            self.raw = std::mem::take(&mut self.text);
            self.reading_id = false;
            self.done = true;
        } else if !self.after_colon {
            self.key = std::mem::take(&mut self.text);
        }
    }

    /// The id: a JSON number or string, or `None` when the object had none (a notification).
    pub(super) fn value(&self) -> Option<Value> {
        if !self.done {
            return None;
        }
        match serde_json::from_slice::<Value>(&self.raw).ok()? {
            id @ (Value::Number(_) | Value::String(_)) => Some(id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_top_level_id_is_found_wherever_it_stands() {
        for (text, id) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"id":99}}"#,
                Some(json!(7)),
            ),
            (
                r#"{"result":{"id":99,"x":["id",1]},"jsonrpc":"2.0","id":"a\"b"}"#,
                Some(json!("a\"b")),
            ),
            (r#"{ "id" : 12 , "error": {}}"#, Some(json!(12))),
            (
                r#"{"method":"notifications/progress","params":{"id":3}}"#,
                None,
            ),
            (r#"{"result":"\"id\":5","id":[1]}"#, None),
            (r#"{"\u0069d":8,"result":{}}"#, Some(json!(8))),
            (r#"{"id":99999,"result":{},"id":9}"#, Some(json!(9))),
        ] {
            for chunk in [1, 5, 1000] {
                let mut scan = TopLevelId::default();
                text.as_bytes()
                    .chunks(chunk)
                    .for_each(|part| scan.feed(part));
                assert_eq!(scan.value(), id, "{text} in pieces of {chunk}");
            }
        }
    }
}
