//! Approval by the person at the MCP host: a pre-execute `Ask` in a served call, when the host
//! installed no approver of its own, becomes an elicitation request to the call's client
//! (`elicitation/create` on 2025-era sessions, an `input_required` round on 2026-07-28 ones).

use serde_json::{Value, json};

use super::{ClientError, Elicitation, ElicitationRequest};
use crate::call::ToolCallView;
use crate::error::ErrorCode;
use crate::result::ToolFailure;

/// The most bytes of the call's arguments (compact JSON) an approval request shows; longer
/// arguments are cut there, and the message says how many bytes there were.
pub const MAX_APPROVAL_ARGUMENT_BYTES: usize = 2048;

/// How the client's person answered: allowed, denied with a reason, or cancelled together with
/// the caller; or nobody could be asked (the client declared no elicitation).
#[derive(Debug)]
pub enum ClientApproval {
    Allowed,
    Denied(String),
    Unaskable(String),
    CallerCancelled,
}

/// Asks the person behind `view`'s client whether the call may run, until the caller's signal
/// fires. `server` names the MCP server a proxied tool comes from.
pub async fn ask_client(
    view: &ToolCallView,
    server: Option<&str>,
    reason: Option<&str>,
) -> ClientApproval {
    let name = &view.name;
    if !view.client.can_elicit() {
        // Nobody can be asked: deny at once rather than wait for an answer that cannot come.
        let why = reason
            .map(|reason| format!(": {reason}"))
            .unwrap_or_default();
        return ClientApproval::Unaskable(format!(
            "tool \"{name}\" requires approval, but the MCP client cannot be asked (it did not declare the elicitation capability){why}"
        ));
    }
    let request = ElicitationRequest::new(
        approval_message(name, server, reason, &view.arguments),
        json!({ "type": "object", "properties": {} }),
    );
    let answer = tokio::select! {
        answer = view.client.elicit(request) => answer,
        () = view.signal.cancelled() => Err(ClientError::Cancelled),
    };
    match answer {
        Ok(Elicitation::Accept(_)) => ClientApproval::Allowed,
        Ok(Elicitation::Decline) => {
            ClientApproval::Denied(format!("the user rejected tool \"{name}\""))
        }
        Err(ClientError::Cancelled) if view.signal.is_cancelled() => {
            ClientApproval::CallerCancelled
        }
        Ok(Elicitation::Cancel) | Err(ClientError::Cancelled) => {
            ClientApproval::Denied(format!("approval for tool \"{name}\" was cancelled"))
        }
        Err(error) => ClientApproval::Denied(format!(
            "tool \"{name}\" requires approval, but asking the MCP client failed: {error}"
        )),
    }
}

/// Who refused an approval: every refusal reads `DENIED` and names its source, so a program,
/// the model and a log tell a person's "no" from a missing approver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialSource {
    /// The registry's approver ([`Registry::set_approver`](crate::Registry::set_approver)).
    Approver,
    /// No approver is set and no MCP client can be asked.
    NoApprover,
    /// The person at the MCP client (an elicitation, or its absence).
    Person,
    /// A durable run's decision (`DurableExt::deny_run` of `dsh-tool-code-mode`) by its owner.
    Owner,
}

impl DenialSource {
    /// How the message names it.
    fn text(self) -> &'static str {
        match self {
            DenialSource::Approver => "denied by the approver",
            DenialSource::NoApprover => "denied: no approver is set",
            DenialSource::Person => "denied by the person at the MCP client",
            DenialSource::Owner => "denied by the run's owner",
        }
    }
}

/// `reason` as a `DENIED` failure naming `source`: `<reason> (<source>)`.
pub fn denied(reason: String, source: DenialSource) -> ToolFailure {
    ToolFailure::coded(ErrorCode::Denied, denial_text(reason, source))
}

/// `reason` followed by its source: `<reason> (<source>)`.
pub fn denial_text(reason: String, source: DenialSource) -> String {
    format!("{reason} ({})", source.text())
}

/// The text the person reads: the tool, its MCP server, the hook's reason and the arguments
/// (cut at [`MAX_APPROVAL_ARGUMENT_BYTES`]).
pub fn approval_message(
    name: &str,
    server: Option<&str>,
    reason: Option<&str>,
    arguments: &Value,
) -> String {
    let mut text = match server {
        Some(server) => format!("Allow tool \"{name}\" of MCP server \"{server}\" to run?"),
        None => format!("Allow tool \"{name}\" to run?"),
    };
    if let Some(reason) = reason {
        text.push_str("\nReason: ");
        text.push_str(reason);
    }
    text.push_str("\nArguments: ");
    text.push_str(&bounded(arguments, MAX_APPROVAL_ARGUMENT_BYTES));
    text
}

/// `value` as compact JSON, cut at a character boundary within `max` bytes with a visible note.
fn bounded(value: &Value, max: usize) -> String {
    let full = value.to_string();
    if full.len() <= max {
        return full;
    }
    let mut end = max;
    while !full.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… (cut: the first {end} of {} bytes)",
        &full[..end],
        full.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_arguments_are_cut_visibly_at_a_character_boundary() {
        let value = json!({ "text": "é".repeat(3000) });
        let shown = bounded(&value, MAX_APPROVAL_ARGUMENT_BYTES);
        let (head, note) = shown.split_once('…').expect("a cut mark");
        assert!(head.len() <= MAX_APPROVAL_ARGUMENT_BYTES, "{}", head.len());
        assert_eq!(
            note,
            format!(
                " (cut: the first {} of {} bytes)",
                head.len(),
                value.to_string().len()
            )
        );
        assert_eq!(bounded(&json!({"a": 1}), 2048), r#"{"a":1}"#);
    }

    #[test]
    fn the_message_names_tool_server_reason_and_arguments() {
        let text = approval_message(
            "mcp__fs__write_file",
            Some("fs"),
            Some("writes a file"),
            &json!({ "path": "a.txt" }),
        );
        assert_eq!(
            text,
            "Allow tool \"mcp__fs__write_file\" of MCP server \"fs\" to run?\nReason: writes a file\nArguments: {\"path\":\"a.txt\"}"
        );
    }
}
