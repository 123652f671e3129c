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
        for choice in listed(property).into_iter().flatten() {
            let _ = writeln!(output, "    {}", escaped(&choice));
        }
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

/// One choice of an enumerated property: the value sent, and the title shown (if any).
struct Choice {
    value: Value,
    title: Option<String>,
}

/// The choices of a property (or of an array's `items`), in the shapes of the elicitation
/// schema (SEP-1330): `enum` with its legacy `enumNames` titles, or the `{const, title}`
/// entries of `oneOf` (single select) or `anyOf` (a multi-select's `items`).
fn choices(property: &Value) -> Option<Vec<Choice>> {
    if let Some(values) = property["enum"].as_array() {
        let titles = property["enumNames"].as_array();
        return Some(
            values
                .iter()
                .enumerate()
                .map(|(index, value)| Choice {
                    value: value.clone(),
                    title: titles
                        .and_then(|titles| titles.get(index)?.as_str())
                        .map(str::to_owned),
                })
                .collect(),
        );
    }
    let titled = property["oneOf"]
        .as_array()
        .or_else(|| property["anyOf"].as_array())?;
    Some(
        titled
            .iter()
            .filter_map(|choice| {
                Some(Choice {
                    value: choice.get("const")?.clone(),
                    title: choice["title"].as_str().map(str::to_owned),
                })
            })
            .collect(),
    )
}

/// The choices of `property` as the prompt lists them, one a line: number, title and the
/// value it stands for.
fn listed(property: &Value) -> Option<Vec<String>> {
    let choices = if property["type"] == "array" {
        choices(&property["items"])
    } else {
        choices(property)
    }?;
    Some(
        choices
            .iter()
            .enumerate()
            .map(|(index, choice)| match &choice.title {
                Some(title) => format!("{}. {title} = {}", index + 1, plain(&choice.value)),
                None => format!("{}. {}", index + 1, plain(&choice.value)),
            })
            .collect(),
    )
}

/// The choice `text` names: by its value or title (case aside), else by its number (a value
/// that reads as a number wins over a position).
fn chosen<'a>(choices: &'a [Choice], text: &str) -> Option<&'a Choice> {
    let text = text.trim();
    let by = |name: &str| name.eq_ignore_ascii_case(text);
    choices
        .iter()
        .find(|choice| by(&plain(&choice.value)))
        .or_else(|| {
            choices
                .iter()
                .find(|choice| choice.title.as_deref().is_some_and(by))
        })
        .or_else(|| {
            let number = text.parse::<usize>().ok()?;
            choices.get(number.checked_sub(1)?)
        })
}

/// The choices a multi-select answer names: separated by commas, or by spaces where a part
/// names no choice as a whole (`1 3`, `value1 value2`); each once, in the order given.
fn chosen_many(choices: &[Choice], text: &str) -> Result<Vec<Value>, String> {
    let mut values: Vec<Value> = Vec::new();
    for part in text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let picked: Vec<&Choice> = match chosen(choices, part) {
            Some(choice) => vec![choice],
            None => part
                .split_whitespace()
                .map(|word| {
                    chosen(choices, word).ok_or_else(|| format!("{part} is not one of the choices"))
                })
                .collect::<Result<_, _>>()?,
        };
        for choice in picked {
            if !values.contains(&choice.value) {
                values.push(choice.value.clone());
            }
        }
    }
    Ok(values)
}

/// What the prompt says of a property: its type, choices, default and whether it is required.
fn describe(property: &Value, required: bool) -> String {
    let kind = property["type"].as_str().unwrap_or("string");
    let mut parts = vec![kind.to_owned()];
    if let Some(description) = property["description"].as_str() {
        parts.insert(0, description.to_owned());
    }
    if listed(property).is_some() {
        parts.push(if kind == "array" {
            "any of the choices above by number, title or value, separated by commas".to_owned()
        } else {
            "one of the choices above by number, title or value".to_owned()
        });
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

/// `text` as a value of `property`'s type (one of its choices, when it has them); `Err` says
/// what is wrong.
fn parse(property: &Value, text: &str) -> Result<Value, String> {
    let kind = property["type"].as_str().unwrap_or("string");
    if kind == "array" {
        let values = match choices(&property["items"]) {
            Some(choices) => chosen_many(&choices, text)?,
            None => text
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect(),
        };
        let count = values.len() as u64;
        if let Some(least) = property["minItems"].as_u64()
            && count < least
        {
            return Err(format!("choose at least {least}"));
        }
        if let Some(most) = property["maxItems"].as_u64()
            && count > most
        {
            return Err(format!("choose at most {most}"));
        }
        return Ok(Value::Array(values));
    }
    if let Some(choices) = choices(property) {
        return chosen(&choices, text)
            .map(|choice| choice.value.clone())
            .ok_or_else(|| format!("{text:?} is not one of the choices"));
    }
    Ok(match kind {
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
        _ => Value::String(text.to_owned()),
    })
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

    /// The SEP-1330 shapes of the conformance suite's `test_elicitation_sep1330_enums`.
    fn enums() -> ElicitationRequest {
        ElicitationRequest::new(
            "pick",
            json!({"type": "object", "properties": {
                "a_titled_single": {"type": "string", "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                ]},
                "b_legacy": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                "c_titled_multi": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]}},
                "d_untitled_multi": {"type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2"]}},
                "e_numbers": {"type": "integer", "enum": [10, 2]},
            }}),
        )
    }

    fn picked(typed: &str) -> (Elicitation, String) {
        let mut output = Vec::new();
        let answer = ask("srv", &enums(), &mut typed.as_bytes(), &mut output);
        (answer, String::from_utf8(output).unwrap())
    }

    /// Titled choices are listed with their titles and values; a choice is taken by number,
    /// title or value, and only the schema's values are sent.
    #[test]
    fn titled_choices_are_shown_and_taken_by_number_title_or_value() {
        let (answer, shown) = picked(
            "y
2
option two
value1 value3
option1, 2
2
",
        );
        let expected = json!({"a_titled_single": "value2", "b_legacy": "opt2",
            "c_titled_multi": ["value1", "value3"], "d_untitled_multi": ["option1", "option2"],
            "e_numbers": 2});
        assert_eq!(
            answer,
            Elicitation::Accept(expected.as_object().unwrap().clone())
        );
        for line in [
            "1. First Option = value1",
            "2. Second Option = value2",
            "3. Option Three = opt3",
            "3. Third Choice = value3",
            "2. option2",
        ] {
            assert!(shown.contains(line), "{line}: {shown}");
        }
        let (answer, _) = picked(
            "y
First Option
opt3
second choice,3

1
",
        );
        let expected = json!({"a_titled_single": "value1", "b_legacy": "opt3",
            "c_titled_multi": ["value2", "value3"], "e_numbers": 10});
        assert_eq!(
            answer,
            Elicitation::Accept(expected.as_object().unwrap().clone())
        );
    }

    /// Text that names no choice, or too many or too few of a multi-select's, is asked again.
    #[test]
    fn anything_but_a_choice_is_asked_again() {
        let (answer, shown) = picked(
            "y
value9
1
Option
1
value1 nope
1 2 3
,
1

7
2
",
        );
        let Elicitation::Accept(values) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(values["c_titled_multi"], json!(["value1"]));
        assert!(
            shown.contains("\"value9\" is not one of the choices"),
            "{shown}"
        );
        assert!(
            shown.contains("value1 nope is not one of the choices"),
            "{shown}"
        );
        assert!(shown.contains("choose at most 2"), "{shown}");
        assert!(shown.contains("choose at least 1"), "{shown}");
        assert!(shown.contains("\"7\" is not one of the choices"), "{shown}");
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
