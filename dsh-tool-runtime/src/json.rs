//! JSON nesting: every depth limit, and the stack-safe helpers that enforce them. Values from
//! models, programs and MCP servers may be nested arbitrarily deep, and serde_json's own clone,
//! drop and (de)serialization recurse once per level; nothing here recurses.
//!
//! Each limit bounds a different input, so their values differ. Levels count arrays and objects
//! nested in each other: `[]` and `{"a": 1}` are one level deep.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use serde_json::Value;

/// Deepest JSON value the pipeline hands to recursive code (validation, deserialization, clone,
/// drop): tool arguments and outputs, a definition's schemas. Twice serde_json's parse limit
/// (128), so arguments parsed from model text never come near it; deeper ones are refused
/// (`INVALID_ARGS`) before anything else touches them.
pub const MAX_VALUE_DEPTH: usize = 256;

/// Deepest parameters schema a dialect transform builds (`$ref`s expanded), in JSON levels
/// (public as `dialect::MAX_DEPTH`). serde_json refuses to parse text deeper than 128 levels, so
/// every schema that arrived as JSON text fits; the bound also keeps the recursive passes far
/// from the stack limit.
pub const MAX_DIALECT_SCHEMA_DEPTH: usize = 128;

/// Deepest schema nesting the SDK generator lowers into types; deeper nodes become unknown. 48
/// keeps Python's bracket nesting well under CPython's parser limit of 200 and the lowering
/// stack small.
pub const MAX_SDK_SCHEMA_DEPTH: usize = 48;

/// Visits `root` and every value inside it, parents before children, each with its level (the
/// root is level 1, its children level 2), until `visit` breaks. The stack holds one iterator
/// per open level: a flat value allocates nothing.
pub fn walk<'a, B>(
    root: &'a Value,
    mut visit: impl FnMut(&'a Value, usize) -> ControlFlow<B>,
) -> ControlFlow<B> {
    visit(root, 1)?;
    let Some(mut current) = Children::of(root) else {
        return ControlFlow::Continue(());
    };
    let mut open: Vec<Children<'a>> = Vec::new();
    loop {
        match current.next() {
            Some(child) => {
                visit(child, open.len() + 2)?;
                if let Some(inner) = Children::of(child) {
                    open.push(std::mem::replace(&mut current, inner));
                }
            }
            None => match open.pop() {
                Some(parent) => current = parent,
                None => return ControlFlow::Continue(()),
            },
        }
    }
}

/// Whether an array or object sits deeper than `limit` levels in `value`.
pub fn deeper_than(value: &Value, limit: usize) -> bool {
    walk(value, |node, level| {
        if level > limit && is_container(node) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// The children of an array or object.
enum Children<'a> {
    Items(std::slice::Iter<'a, Value>),
    Entries(serde_json::map::Values<'a>),
}

impl<'a> Children<'a> {
    fn of(value: &'a Value) -> Option<Self> {
        match value {
            Value::Array(items) => Some(Children::Items(items.iter())),
            Value::Object(map) => Some(Children::Entries(map.values())),
            _ => None,
        }
    }
}

impl<'a> Iterator for Children<'a> {
    type Item = &'a Value;

    fn next(&mut self) -> Option<&'a Value> {
        match self {
            Children::Items(items) => items.next(),
            Children::Entries(entries) => entries.next(),
        }
    }
}

/// Drops a value without recursion. serde_json's own `Drop` recurses once per nesting level,
/// which a hostile, deeply nested value turns into a stack overflow.
pub fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, item)| item)),
            _ => {}
        }
    }
}

/// The deepest bracket nesting of JSON text, ignoring brackets inside strings: one pass, no
/// allocation, so it can measure text before anything parses it.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Compact JSON text of `value`, built without recursion. With `sort_keys`, object keys are
/// deep-sorted in UTF-16 code-unit order (JavaScript's default sort, so the repeat-call reminder's
/// canonical arguments match DSH's); array order is always kept.
pub fn compact(value: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    let mut stack: Vec<Frame<'_>> = vec![Frame::Value(value)];
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Text(text) => out.push_str(text),
            Frame::Key(key) => {
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
            }
            Frame::Value(Value::Array(items)) => {
                out.push('[');
                stack.push(Frame::Text("]"));
                for (index, item) in items.iter().enumerate().rev() {
                    stack.push(Frame::Value(item));
                    if index > 0 {
                        stack.push(Frame::Text(","));
                    }
                }
            }
            Frame::Value(Value::Object(map)) => {
                out.push('{');
                stack.push(Frame::Text("}"));
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if sort_keys {
                    entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
                }
                for (index, (key, item)) in entries.into_iter().enumerate().rev() {
                    stack.push(Frame::Value(item));
                    stack.push(Frame::Key(key));
                    if index > 0 {
                        stack.push(Frame::Text(","));
                    }
                }
            }
            Frame::Value(scalar) => out.push_str(&scalar.to_string()),
        }
    }
    out
}

enum Frame<'a> {
    Value(&'a Value),
    Key(&'a String),
    Text(&'static str),
}

fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The length in bytes of `value` as compact JSON written by `serde_json`, counted as it is
/// written, without keeping the text. A value that cannot be JSON (a map with non-string keys)
/// counts what was written before the error; every value measured here can be.
pub fn serialized_len(value: &impl serde::Serialize) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_deeply_and_keeps_array_order() {
        let value = serde_json::json!({"b": [3, {"z": 1, "a": null}], "a": "x\"y"});
        assert_eq!(
            compact(&value, true),
            r#"{"a":"x\"y","b":[3,{"a":null,"z":1}]}"#
        );
    }

    #[test]
    fn canonical_json_survives_deep_nesting() {
        let mut value = Value::Null;
        for _ in 0..5_000 {
            value = Value::Array(vec![value]);
        }
        assert_eq!(compact(&value, true).len(), 5_000 * 2 + 4);
        // Dropping a 5,000-deep value recurses in serde_json; keep the test thread's stack happy.
        std::mem::forget(value);
    }

    #[test]
    fn utf16_order_differs_from_byte_order_for_astral_characters() {
        // U+1F600 sorts after U+FF61 in UTF-8 bytes but before it in UTF-16 units (surrogates).
        assert_eq!(utf16_cmp("\u{1F600}", "\u{FF61}"), Ordering::Less);
        assert_eq!("\u{1F600}".cmp("\u{FF61}"), Ordering::Greater);
    }

    #[test]
    fn unsorted_keeps_insertion_order() {
        let value = serde_json::json!({"b": 1, "a": 2});
        assert_eq!(compact(&value, false), r#"{"b":1,"a":2}"#);
    }

    #[test]
    fn levels_count_nested_containers() {
        let value = serde_json::json!({"a": [1, {"b": []}], "c": "x"});
        let mut levels = Vec::new();
        let _ = walk(&value, |node, level| {
            levels.push((node.is_array() || node.is_object(), level));
            ControlFlow::<()>::Continue(())
        });
        assert_eq!(
            levels.iter().filter(|(c, _)| *c).map(|(_, l)| *l).max(),
            Some(4)
        );
        assert_eq!(levels.len(), 6);
        assert!(deeper_than(&value, 3) && !deeper_than(&value, 4));
        assert!(!deeper_than(&serde_json::json!([1, 2, "flat"]), 1));
    }

    #[test]
    fn deep_values_are_walked_and_dropped_without_recursion() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        assert!(deeper_than(&value, 99_999) && !deeper_than(&value, 100_000));
        dismantle(value);
    }

    #[test]
    fn text_depth_ignores_brackets_in_strings() {
        assert_eq!(text_depth(br#"{"a": [1, {"b": "[[[{{"}]}"#), 3);
        assert_eq!(text_depth(br#"{"a": "\"[["}"#), 1);
        assert_eq!(text_depth(b"7"), 0);
    }
}
