//! Durable `run_code` calls served over MCP: with a journal set
//! ([`McpServeOptions::journal`](super::McpServeOptions::journal)), each served `run_code` call
//! runs as a durable run under a fresh random run id, and a run an `Ask` parks comes back to the
//! person at the MCP host:
//! - a 2026-07-28 client gets an `input_required` result whose `requestState` is a signed
//!   continuation (the run, the waiting call, a digest of its arguments, the principal it was
//!   shown to, this server's name, an expiry) and whose one request (`approval`) is an
//!   elicitation naming the waiting call; its retry carrying the answer decides exactly that
//!   call, once, from the journal alone, on this server or a named peer sharing the journal; a
//!   retry carrying the continuation and no answer (its person was not reached before it
//!   expired, say) is asked again: a new continuation for the same waiting call, issued only
//!   to the principal the old one was shown to;
//! - a 2025-era session is sent the elicitation at once and the run resumes in the same request;
//! - a client that cannot be asked gets the run denied with the reason, never a hang.

use std::sync::Arc;

use rmcp::model::{ElicitResult, ElicitationAction, InputRequests, InputRequiredResult};
use rmcp::model::{InputRequest, InputResponses};
use serde_json::{Value, json};

use crate::call::approval::{DenialSource, approval_message};
use crate::durable::DurableCallExt;
use crate::durable::continuation::Presenter;
use crate::durable::run::Decider;
use crate::durable::run::DurableExt;
use crate::durable::{
    ContinuationError, DurableRun, JournalError, JournalStore, ParkedRun, Principal, RUN_PARKED,
    RunStatus,
};
use crate::registry::{RUN_CODE, Registry};
use crate::result::{ToolFailure, ToolResult};
use crate::{ClientChannel, Elicitation, ElicitationRequest, ErrorCode, ToolCall};

/// The journal of a server's `run_code` calls.
#[derive(Clone)]
pub(crate) struct ServedJournal(pub(crate) Arc<dyn JournalStore>);

/// Who answers a parked run, and where: the principal of the request, this server's name
/// and the issuers whose continuations it takes (itself and its peers).
pub(crate) struct Answerer<'a> {
    pub(crate) principal: Principal,
    pub(crate) name: &'a str,
    pub(crate) issuers: &'a [String],
}

impl std::fmt::Debug for ServedJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServedJournal")
    }
}

/// The prefix of a `requestState` that is a continuation of a parked durable run.
const STATE_PREFIX: &str = "dshc1.";

/// The key of the one request an `input_required` answer for a parked run carries.
const APPROVAL_KEY: &str = "approval";

/// What a parked run's request answers the client.
pub(crate) enum Parked {
    /// The run ended (or never parked): this result.
    Done(ToolResult),
    /// The run waits: send this, the client's retry carries the answer.
    Input(InputRequiredResult),
}

/// `call` made durable under a fresh run id when it is a `run_code` call; the run id.
pub(crate) fn make_durable(
    store: &Arc<dyn JournalStore>,
    call: ToolCall,
) -> (ToolCall, Option<String>) {
    if call.name != RUN_CODE {
        return (call, None);
    }
    let Some(id) = super::rounds::random_handle() else {
        return (call, None);
    };
    let run = DurableRun::new(store.clone(), id.clone());
    (call.durable(run), Some(id))
}

/// Whether a `requestState` is a continuation of a parked run (else it is a round's handle).
pub(crate) fn is_continuation(state: &str) -> bool {
    state.starts_with(STATE_PREFIX)
}

fn is_parked(result: &ToolResult) -> bool {
    result
        .error_code()
        .is_some_and(|code| code.as_str() == RUN_PARKED)
}

/// For a 2026-07-28 client: `result` as it is, or — parked — the `input_required` answer (a
/// client that cannot be asked has the run denied at once instead).
pub(crate) async fn answer_modern(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    client: &ClientChannel,
    answerer: &Answerer<'_>,
    id: &str,
    result: ToolResult,
) -> Parked {
    if !is_parked(&result) {
        return Parked::Done(result);
    }
    if !client.can_elicit() {
        return Parked::Done(settle_legacy(registry, store, client, id, result).await);
    }
    let message = match waiting_call(store, id).await {
        Ok(message) => message,
        Err(failure) => return Parked::Done(failure),
    };
    let run = DurableRun::new(store.clone(), id);
    let continuation = match registry
        .issue(&run, &answerer.principal, answerer.name)
        .await
    {
        Ok(parked) => parked.continuation,
        Err(error) => return Parked::Done(failure(error.to_string())),
    };
    input_required(message, continuation)
}

/// The `input_required` answer asking the person `message` (the waiting call), its retry to
/// carry `continuation`.
fn input_required(message: String, continuation: String) -> Parked {
    let request: InputRequest = match serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": {} },
        },
    })) {
        Ok(request) => request,
        Err(error) => {
            return Parked::Done(failure(format!(
                "the approval request cannot be built: {error}"
            )));
        }
    };
    let mut requests = InputRequests::new();
    requests.insert(APPROVAL_KEY.to_owned(), request);
    Parked::Input(InputRequiredResult::new(Some(requests), Some(continuation)))
}

/// A 2026-07-28 client's retry carrying `continuation`: its answer approves or denies the call
/// the continuation names, and the run resumes here; the new result may be parked again. A
/// retry without an answer asks again: the same waiting call with a new continuation, even
/// when this one has expired ([`dsh_tool_code_mode::DurableExt::renew`]), so a person who was not reached in time
/// can still decide the run.
///
/// # Errors
/// The message for an answer that is malformed, or a continuation that is refused
/// (`CONTINUATION_REFUSED`: forged, used, expired, another principal's or another server's,
/// or for a call the run no longer waits at; asking again refuses all but expired): the
/// request is invalid and the run stays parked.
pub(crate) async fn resume_modern(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    client: &ClientChannel,
    answerer: &Answerer<'_>,
    continuation: &str,
    mut responses: InputResponses,
) -> Result<Parked, String> {
    let Some(answer) = responses.remove(APPROVAL_KEY) else {
        return ask_again(registry, store, answerer, continuation).await;
    };
    let answer: ElicitResult = serde_json::from_value(answer).map_err(|error| {
        format!("the \"{APPROVAL_KEY}\" answer is no elicitation result: {error}")
    })?;
    let decider = Decider {
        principal: &answerer.principal,
        issuers: answerer.issuers,
        source: DenialSource::Person,
    };
    // The tool named in a denial is read once the continuation holds (`decide` checks it).
    let denial = match answer.action {
        ElicitationAction::Accept => None,
        ElicitationAction::Decline => Some(Refusal::Rejected),
        _ => Some(Refusal::Cancelled),
    };
    let denial = match denial {
        None => None,
        Some(refusal) => Some(match waiting_tool_of(store, continuation).await {
            Some(tool) => refusal.about(&tool),
            None => refusal.about_call(),
        }),
    };
    let run = registry
        .decide(store, continuation, &decider, denial)
        .await
        .map_err(|error| refused(&error))?;
    let id = run.run_id.clone();
    let result = registry
        .resume_run(run)
        .await
        .unwrap_or_else(|error| failure(error.to_string()));
    Ok(answer_modern(registry, store, client, answerer, &id, result).await)
}

/// The waiting call `continuation` names asked again, with a new continuation shown to the
/// same principal (the old one may have expired; it decides nothing).
async fn ask_again(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    answerer: &Answerer<'_>,
    continuation: &str,
) -> Result<Parked, String> {
    let presenter = Presenter {
        principal: &answerer.principal,
        issuers: answerer.issuers,
    };
    let parked = registry
        .renew(store, continuation, &presenter, answerer.name)
        .await
        .map_err(|error| refused(&error))?;
    let message = waiting_call(store, &parked.run_id)
        .await
        .map_err(|failure| {
            failure
                .error()
                .map(|e| e.message.clone())
                .unwrap_or_default()
        })?;
    Ok(input_required(message, parked.continuation))
}

/// A refused decision as the client reads it: the code first for a refused continuation, and
/// for an expired one how to be asked again.
fn refused(error: &JournalError) -> String {
    match error {
        JournalError::Continuation(refusal @ ContinuationError::Expired { .. }) => format!(
            "{}: {refusal}: send the call again with this requestState and no inputResponses \
             to be asked again",
            refusal.code()
        ),
        JournalError::Continuation(refusal) => format!("{}: {refusal}", refusal.code()),
        other => other.to_string(),
    }
}

/// How a person said no.
enum Refusal {
    Rejected,
    Cancelled,
}

impl Refusal {
    fn about(&self, tool: &str) -> String {
        match self {
            Refusal::Rejected => format!("the user rejected tool \"{tool}\""),
            Refusal::Cancelled => format!("approval for tool \"{tool}\" was cancelled"),
        }
    }

    fn about_call(&self) -> String {
        match self {
            Refusal::Rejected => "the user rejected the call".to_owned(),
            Refusal::Cancelled => "the approval was cancelled".to_owned(),
        }
    }
}

/// The tool of the run a continuation names while it is parked (its tag unchecked: only for
/// the text of a denial that `decide` checks before recording it).
async fn waiting_tool_of(store: &Arc<dyn JournalStore>, continuation: &str) -> Option<String> {
    let secret = store.continuation_secret().ok()?;
    let claims = secret.open(continuation).ok()?;
    waiting_tool(store, &claims.run).await
}

/// For a 2025-era session: while the run `id` is parked, the person is asked through `client`
/// and the run resumes with the answer; a client that cannot be asked (in either era) has the
/// run denied.
///
/// The answer decides only the call it was asked about: the continuation is issued (to the
/// local owner, the decision never leaving the server) from the same journal record the
/// person's message is made from, before they are asked, so it names that call's number and
/// the digest of the arguments shown. When that call is decided elsewhere while the person
/// looks at it (`runs approve`, say), the answer is refused (`CONTINUATION_REFUSED`) and applied
/// to nothing: the run keeps waiting wherever it went on to wait.
pub(crate) async fn settle_legacy(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    client: &ClientChannel,
    id: &str,
    mut result: ToolResult,
) -> ToolResult {
    while is_parked(&result) {
        let run = DurableRun::new(store.clone(), id);
        let parked = match registry.parked_run(&run).await {
            Ok(parked) => parked,
            Err(error) => return failure(error.to_string()),
        };
        let denial = if client.can_elicit() {
            let message = approval_message(
                &parked.tool,
                None,
                parked.reason.as_deref(),
                &parked.arguments,
            );
            let request =
                ElicitationRequest::new(message, json!({ "type": "object", "properties": {} }));
            match client.elicit(request).await {
                Ok(Elicitation::Accept(_)) => None,
                Ok(Elicitation::Cancel) | Err(_) => Some(Refusal::Cancelled.about(&parked.tool)),
                // A decline, or an answer kind this version does not know: not an approval.
                Ok(_) => Some(Refusal::Rejected.about(&parked.tool)),
            }
        } else {
            Some(format!(
                "tool \"{}\" requires approval, but the MCP client cannot be asked (it did not \
                 declare the elicitation capability)",
                parked.tool
            ))
        };
        result = match decide(registry, store, &parked, denial).await {
            Ok(result) => result,
            Err(result) => return result,
        };
    }
    result
}

/// Decides the call `parked` names, as the 2025-era session's person answered it in this very
/// request, and resumes the run.
///
/// # Errors
/// The result to answer instead: `CONTINUATION_REFUSED` when that call was decided meanwhile
/// (or the run no longer waits at it with the arguments shown), naming the call the answer
/// was about; the run is left as it is.
async fn decide(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    parked: &ParkedRun,
    denial: Option<String>,
) -> Result<ToolResult, ToolResult> {
    let decider = Decider {
        principal: &Principal::local(),
        issuers: &[String::new()],
        source: DenialSource::Person,
    };
    let run = match registry
        .decide(store, &parked.continuation, &decider, denial)
        .await
    {
        Ok(run) => run,
        Err(JournalError::Continuation(refusal)) => {
            return Err(ToolResult::coded_failure(
                ErrorCode::Other(refusal.code().to_owned()),
                format!(
                    "{}: {refusal}: the answer about call #{} ({}) of durable run \"{}\" was \
                     not applied, since that call was decided elsewhere while the person was \
                     asked; the run was not changed by it",
                    refusal.code(),
                    parked.seq,
                    parked.tool,
                    parked.run_id
                ),
            ));
        }
        Err(error) => return Err(failure(error.to_string())),
    };
    registry
        .resume_run(run)
        .await
        .map_err(|error| failure(error.to_string()))
}

/// The text the person reads for the call the run `id` waits at.
async fn waiting_call(store: &Arc<dyn JournalStore>, id: &str) -> Result<String, ToolResult> {
    let record = store
        .run(id)
        .await
        .map_err(|error| failure(error.to_string()))?
        .ok_or_else(|| failure(format!("durable run \"{id}\" is not in the journal")))?;
    let RunStatus::Parked {
        tool, args, reason, ..
    } = record.status
    else {
        return Err(failure(format!("durable run \"{id}\" is not parked")));
    };
    let arguments = serde_json::from_str(&args).unwrap_or(Value::String(args));
    Ok(approval_message(&tool, None, reason.as_deref(), &arguments))
}

async fn waiting_tool(store: &Arc<dyn JournalStore>, id: &str) -> Option<String> {
    match store.run(id).await.ok()??.status {
        RunStatus::Parked { tool, .. } => Some(tool),
        _ => None,
    }
}

fn failure(message: String) -> ToolResult {
    ToolResult::failure(ToolFailure::plain(message))
}
