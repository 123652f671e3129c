//! The command's answer when an MCP server asks its person for input (`elicitation/create`,
//! form mode): the person at the terminal answers when stdin and stderr are one; otherwise no
//! one can, and the request is declined with a line on stderr saying so. Only the person at the
//! terminal decides: nothing a server sends is answered on its own.

use std::io::{BufRead, IsTerminal, Write};

use crate::terminal::escaped;
use dsh_tools::client::{Elicitation, ElicitationRequest};
use dsh_tools::mcp::McpServer;
use serde_json::{Map, Value};

/// One question on the terminal at a time: several servers may ask at once.
static ASKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `server` with the command's elicitation handler: it declares the `elicitation` capability.
pub(crate) fn attach(server: McpServer) -> McpServer {
    let name = server.name().to_owned();
    server.on_elicitation(move |request| answer(name.clone(), request, terminal_attached()))
}

/// `true` when a person can be asked: stdin and stderr are a terminal.
fn terminal_attached() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The answer to `request` of `server`: asked on the terminal when `attached`, else declined.
async fn answer(server: String, request: ElicitationRequest, attached: bool) -> Elicitation {
    if !attached {
        eprintln!(
            "dsh-tools: {} asks \"{}\": declined (no terminal to ask on)",
            escaped(&server),
            escaped(&request.message)
        );
        return Elicitation::Decline;
    }
    tokio::task::spawn_blocking(move || {
        let _one = ASKING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut input = std::io::stdin().lock();
        let mut output = std::io::stderr().lock();
        ask(&server, &request, &mut input, &mut output)
    })
    .await
    .unwrap_or(Elicitation::Cancel)
}

/// Reads one line; `None` at the end of input (or on a read error).
fn line(input: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
    }
}

/// Asks `request` on `output`, reading the person's answers from `input`: first whether to
/// answer at all (yes, no = decline, cancel), then each property of the requested schema. An
/// empty answer leaves a property out (its `default` is filled in after); a required property
/// without a default is asked again, and so is a value that is not of the property's type or
/// not one of its choices. The end of input cancels.
fn ask(
    server: &str,
    request: &ElicitationRequest,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> Elicitation {
    // The server's words never drive the terminal (`terminal::escaped`).
    let _ = writeln!(
        output,
        "{} asks: {}",
        escaped(server),
        escaped(&request.message)
    );
    loop {
        let _ = write!(output, "Answer? [y]es, [n]o (decline), [c]ancel: ");
        let _ = output.flush();
        match line(input).map(|answer| answer.trim().to_ascii_lowercase()) {
            None => return Elicitation::Cancel,
            Some(answer) if answer == "y" || answer == "yes" => break,
            Some(answer) if answer == "n" || answer == "no" => return Elicitation::Decline,
            Some(answer) if answer == "c" || answer == "cancel" => return Elicitation::Cancel,
            Some(_) => {}
        }
    }
    let schema = &request.requested_schema;
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut values = Map::new();
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, property) in &properties {
        let must = required.contains(&name.as_str()) && property.get("default").is_none();
        loop {
            let (shown, described) = (escaped(name), escaped(&describe(property, must)));
            let _ = write!(output, "  {shown} ({described}): ");
            let _ = output.flush();
            let Some(text) = line(input) else {
                return Elicitation::Cancel;
            };
            if text.is_empty() {
                if must {
                    let _ = writeln!(output, "  {} is required", escaped(name));
                    continue;
                }
                break;
            }
            match parse(property, &text) {
                Ok(value) => {
                    values.insert(name.clone(), value);
                    break;
                }
                Err(why) => {
                    let _ = writeln!(output, "  {}; try again", escaped(&why));
                }
            }
        }
    }
    Elicitation::Accept(values)
}

/// The choices of a property: `enum`, or the `const`s of its `oneOf` (titled enums).
fn choices(property: &Value) -> Option<Vec<Value>> {
    if let Some(values) = property["enum"].as_array() {
        return Some(values.clone());
    }
    let titled = property["oneOf"].as_array()?;
    Some(
        titled
            .iter()
            .map(|choice| choice["const"].clone())
            .collect(),
    )
}

/// What the prompt says of a property: its type, choices, default and whether it is required.
fn describe(property: &Value, required: bool) -> String {
    let kind = property["type"].as_str().unwrap_or("string");
    let mut parts = vec![kind.to_owned()];
    if let Some(description) = property["description"].as_str() {
        parts.insert(0, description.to_owned());
    }
    let items = if kind == "array" {
        choices(&property["items"])
    } else {
        choices(property)
    };
    if let Some(items) = items {
        let names: Vec<String> = items.iter().map(plain).collect();
        let joiner = if kind == "array" {
            ", any of "
        } else {
            ", one of "
        };
        parts.push(
            format!("{joiner}{}", names.join("|"))
                .trim_start_matches(", ")
                .to_owned(),
        );
    }
    if let Some(default) = property.get("default") {
        parts.push(format!("default {}", plain(default)));
    }
    if required {
        parts.push("required".to_owned());
    }
    parts.join(", ")
}

/// A JSON value as typed: strings without their quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `text` as a value of `property`'s type; `Err` says what is wrong.
fn parse(property: &Value, text: &str) -> Result<Value, String> {
    let kind = property["type"].as_str().unwrap_or("string");
    let value = match kind {
        "integer" => text
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{text:?} is not an integer"))?,
        "number" => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("{text:?} is not a number"))?,
        "boolean" => match text.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err(format!("{text:?} is not yes or no")),
        },
        "array" => {
            let allowed = choices(&property["items"]);
            let items = text
                .split(',')
                .map(|item| Value::String(item.trim().to_owned()))
                .filter(|item| item.as_str() != Some(""));
            let items: Vec<Value> = items.collect();
            if let Some(allowed) = &allowed
                && let Some(wrong) = items.iter().find(|item| !allowed.contains(item))
            {
                return Err(format!("{} is not one of the choices", plain(wrong)));
            }
            Value::Array(items)
        }
        _ => Value::String(text.to_owned()),
    };
    match choices(property) {
        Some(allowed) if kind != "array" && !allowed.contains(&value) => {
            Err(format!("{text:?} is not one of the choices"))
        }
        _ => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> ElicitationRequest {
        ElicitationRequest::new(
            "who are you?",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer"},
                "score": {"type": "number"},
                "status": {"type": "string", "enum": ["active", "inactive"]},
                "verified": {"type": "boolean", "default": true},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            }, "required": ["age"]}),
        )
    }

    fn asked(typed: &str) -> (Elicitation, String) {
        let mut output = Vec::new();
        let answer = ask("srv", &request(), &mut typed.as_bytes(), &mut output);
        (answer, String::from_utf8(output).unwrap())
    }

    #[test]
    fn typed_answers_are_parsed_by_type_and_empty_ones_left_out() {
        let (answer, shown) = asked("y\n\n41\n2.5\nactive\nno\na, b\n");
        let expected = json!({"age": 41, "score": 2.5, "status": "active", "verified": false,
            "tags": ["a", "b"]});
        assert_eq!(
            answer,
            Elicitation::Accept(expected.as_object().unwrap().clone())
        );
        assert!(shown.contains("srv asks: who are you?"), "{shown}");
        assert!(shown.contains("default John Doe"), "{shown}");
    }

    #[test]
    fn a_wrong_value_or_a_missing_required_one_is_asked_again() {
        let (answer, shown) = asked("yes\n\n\nforty\n41\nx\n\npending\ninactive\nmaybe\n\nc\n\n");
        let Elicitation::Accept(values) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(values["age"], 41);
        assert_eq!(values["status"], "inactive");
        assert!(!values.contains_key("verified"));
        assert!(shown.contains("age is required"), "{shown}");
        assert!(shown.contains("\"forty\" is not an integer"), "{shown}");
        assert!(
            shown.contains("\"pending\" is not one of the choices"),
            "{shown}"
        );
        assert!(shown.contains("c is not one of the choices"), "{shown}");
    }

    #[test]
    fn the_person_may_decline_or_cancel_and_the_end_of_input_cancels() {
        assert_eq!(asked("n\n").0, Elicitation::Decline);
        assert_eq!(asked("cancel\n").0, Elicitation::Cancel);
        assert_eq!(asked("").0, Elicitation::Cancel);
        assert_eq!(asked("y\n\n").0, Elicitation::Cancel);
    }

    /// A server's message, property names and descriptions are shown escaped: they never
    /// drive the terminal (clear it, set its title) nor forge a line of their own.
    #[test]
    fn the_servers_words_are_escaped() {
        let request = ElicitationRequest::new(
            "hi\u{1b}[2J\u{1b}]0;pwned\u{7}\nFAKE LINE",
            json!({"type": "object", "properties": {
                "x\u{1b}[31m": {"type": "string", "description": "d\r\u{202e}"},
            }}),
        );
        let mut output = Vec::new();
        ask("s\u{1b}v", &request, &mut "y\nv\n".as_bytes(), &mut output);
        let shown = String::from_utf8(output).unwrap();
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
        assert!(
            !shown.contains('\u{202e}') && !shown.contains('\r'),
            "{shown:?}"
        );
        assert!(!shown.contains("\nFAKE LINE"), "{shown:?}");
        assert!(shown.contains("\\u{1b}[2J"), "{shown:?}");
    }

    /// With no terminal no one is asked: the server's request is declined, whatever it asks.
    #[tokio::test]
    async fn without_a_terminal_the_request_is_declined() {
        assert_eq!(
            answer("srv".to_owned(), request(), false).await,
            Elicitation::Decline
        );
    }
}
