//! Rendering of `run_code` results.

use serde_json::Value;

/// Most indentation, in spaces, before deeper levels render compact.
const MAX_INDENT: usize = 10;

/// The model-facing text of a run: the logs joined by `\n`, then the rendered result; an empty
/// run reads `(run_code completed with no output)`.
pub fn render_run(logs: &[String], result: Option<&Value>) -> String {
    let mut parts = Vec::new();
    let logs = logs.join("\n");
    if !logs.is_empty() {
        parts.push(logs);
    }
    if let Some(result) = result {
        let rendered = render_result(result);
        if !rendered.is_empty() {
            parts.push(rendered);
        }
    }
    if parts.is_empty() {
        "(run_code completed with no output)".to_owned()
    } else {
        parts.join("\n")
    }
}

/// A string result raw; anything else as 2-space pretty JSON whose indentation stops at
/// 10 spaces (deeper subtrees compact). Iterative, so any depth renders.
pub fn render_result(value: &Value) -> String {
    if let Value::String(text) = value {
        return text.clone();
    }
    enum Step<'a> {
        Value(&'a Value, usize),
        Text(String),
    }
    let mut out = String::new();
    let mut stack = vec![Step::Value(value, 0)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(text) => out.push_str(&text),
            Step::Value(node, indent) => {
                let (open, close, children): (char, char, Vec<(Option<&String>, &Value)>) =
                    match node {
                        Value::Array(items) if !items.is_empty() => {
                            ('[', ']', items.iter().map(|item| (None, item)).collect())
                        }
                        Value::Object(map) if !map.is_empty() => {
                            ('{', '}', map.iter().map(|(k, v)| (Some(k), v)).collect())
                        }
                        scalar_or_empty => {
                            out.push_str(&compact(scalar_or_empty));
                            continue;
                        }
                    };
                let inner = indent + 2;
                if inner > MAX_INDENT {
                    out.push_str(&compact(node));
                    continue;
                }
                out.push(open);
                stack.push(Step::Text(format!("\n{}{close}", " ".repeat(indent))));
                let count = children.len();
                for (index, (key, child)) in children.into_iter().enumerate().rev() {
                    if index + 1 < count {
                        stack.push(Step::Text(",".to_owned()));
                    }
                    stack.push(Step::Value(child, inner));
                    let prefix = match key {
                        Some(key) => {
                            format!("\n{}{}: ", " ".repeat(inner), Value::String(key.clone()))
                        }
                        None => format!("\n{}", " ".repeat(inner)),
                    };
                    stack.push(Step::Text(prefix));
                }
            }
        }
    }
    out
}

/// Compact JSON of a subtree. Subtrees reached here sit at most a few levels below the cap, but
/// the value itself may be arbitrarily deep, so serialize without recursion.
fn compact(value: &Value) -> String {
    crate::json::compact(value, false)
}

/// The text of `run_code`'s output value `{"logs": [string…], "result": …}` (as
/// [`render_run`]), or with `"resultJson": string` in place of `result`, whose text is shown as
/// it is; entries of `logs` that are not strings are left out.
pub fn render_output(value: &Value) -> String {
    let logs: Vec<String> = value["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    render_run(
        &logs,
        value.get("result").or_else(|| value.get("resultJson")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_runs_say_so() {
        assert_eq!(render_run(&[], None), "(run_code completed with no output)");
        assert_eq!(
            render_run(&["a".into(), "b".into()], Some(&json!("c"))),
            "a\nb\nc"
        );
    }

    #[test]
    fn results_render_pretty_with_capped_indentation() {
        assert_eq!(render_result(&json!(null)), "null");
        assert_eq!(render_result(&json!({})), "{}");
        assert_eq!(
            render_result(&json!({"a": [1, 2]})),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
        );
        let deep = json!({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}});
        let text = render_result(&deep);
        assert!(text.contains("\"e\": {\"f\":1}"), "{text}");
        assert!(!text.contains(&" ".repeat(12)), "{text}");
    }
}
