//! The host's frames to the child: a call's reply, success or failure, written as one line.

use serde_json::Value;

use super::with_stack_for;

/// Appends `value` as compact JSON, on a stack sized for its `depth`.
fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) {
    with_stack_for(depth, || {
        // Writing a `Value` into a Vec cannot fail: its keys are strings and numbers finite.
        if serde_json::to_writer(&mut *out, value).is_err() {
            out.extend_from_slice(b"null");
        }
    });
}

/// A success reply frame for call `id`; `depth` is the value's depth from
/// [`inspect`](super::inspect).
pub(crate) fn reply_ok(id: u64, value: &Value, depth: usize) -> Vec<u8> {
    let mut out = format!(r#"{{"type":"reply","id":{id},"ok":true,"value":"#).into_bytes();
    write_value(&mut out, value, depth);
    out.extend_from_slice(b"}\n");
    out
}

/// A failure reply frame for call `id` with the failure's code (`"code"` only when there is one).
pub(crate) fn reply_failure(id: u64, message: &str, code: Option<&str>) -> Vec<u8> {
    let mut frame = serde_json::json!({
        "type": "reply", "id": id, "ok": false, "message": message,
    });
    if let Some(code) = code {
        frame["code"] = Value::from(code);
    }
    let mut out = serde_json::to_vec(&frame).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::super::inspect;
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_are_valid_json() {
        let v = json!({"a": [1, "x\n"]});
        let ok = reply_ok(7, &v, inspect(&v).unwrap());
        assert_eq!(
            serde_json::from_slice::<Value>(&ok).unwrap(),
            json!({"type":"reply","id":7,"ok":true,"value":v})
        );
        let err = reply_failure(8, "bad \"x\"", None);
        assert_eq!(
            serde_json::from_slice::<Value>(&err).unwrap(),
            json!({"type":"reply","id":8,"ok":false,"message":"bad \"x\""})
        );
    }
}
