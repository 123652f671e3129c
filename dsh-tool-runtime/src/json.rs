//! Stack-safe JSON helpers: values from models and programs may be nested arbitrarily deep.

use std::cmp::Ordering;

use serde_json::Value;

/// Compact JSON text of `value`, built without recursion. With `sort_keys`, object keys are
/// deep-sorted in UTF-16 code-unit order (JavaScript's default sort; REFERENCE §3.2 canonical
/// arguments); array order is always kept.
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
}
