//! Multi round-trip requests (MCP 2026-07-28): a call that needs its client (an approval, an
//! elicitation, a sampling request) answers `tools/call` with an `input_required` result, and
//! the client's retry carries the answers.
//!
//! The call itself keeps running on the server as a task of its own, waiting for the answers;
//! `requestState` is only an opaque, random handle to it (never data the server trusts). The
//! handle answers only the request it was sent to: a retry is taken from the principal the
//! call was asked by (its OAuth subject, its MCP session, or — without either — the clients
//! holding the server's credentials) for the same tool with the same arguments; any other is
//! refused (`CONTINUATION_REFUSED`) and the call keeps waiting for its own retry. A call
//! whose client does not retry within [`INPUT_WAIT`] is cancelled; past [`MAX_WAITING`] waiting
//! calls, a new request for a client fails at once (the call sees the failure) instead of
//! waiting.
//!
//! A call may come with its answers before any round (SEP-2322 lets a client send
//! `inputResponses` it already has): an answer under the key a tool chose for its request
//! answers that request without a round. Answers under other keys are ignored, and an answer
//! that is not a result of its request's kind answers nothing: the request is asked.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::client::InputAsk;
use crate::durable::{CONTINUATION_REFUSED, Principal};
use crate::result::ToolResult;

/// How long a call waits for its client's retry before it is cancelled.
pub(crate) const INPUT_WAIT: Duration = Duration::from_secs(15 * 60);

/// The most calls of one server that may wait for their client's retry at once.
pub(crate) const MAX_WAITING: usize = 1024;

/// One call running on its own task, with the requests for its client it has made.
pub(crate) struct RoundCall {
    result: JoinHandle<ToolResult>,
    asks: mpsc::Receiver<InputAsk>,
    asks_open: bool,
    /// The requests the client was sent in the last round and has not answered, by their key.
    open: Vec<(String, InputRequest, oneshot::Sender<Value>)>,
    /// The call's own signal (the request's is gone once a round is answered).
    signal: CancellationToken,
    /// The capability the call needed and its client had not declared, if any.
    pub(crate) missing: Arc<Mutex<Option<&'static str>>>,
    /// The call becomes a task once a retry has answered its requests.
    escalates: bool,
    /// The request that made the call: only its retry answers the call's requests (boxed: a
    /// call handed back from `park` stays small).
    asked: Box<Asked>,
    /// The answers the request came with before any round, by key, until a request takes one.
    offered: InputResponses,
}

/// Who asked for a call, and what: the principal of the request, the tool and a SHA-256 digest
/// of the arguments as canonical JSON (the call's requests were made for these; a retry with
/// others would have the person's answer apply to a call they were not shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    principal: Principal,
    tool: String,
    args: [u8; 32],
}

impl Asked {
    /// The call of `tool` with `arguments`, requested by `principal`.
    pub(crate) fn new(principal: Principal, tool: &str, arguments: &Value) -> Self {
        use sha2::Digest;
        let canonical = crate::json::compact(arguments, true);
        Asked {
            principal,
            tool: tool.to_owned(),
            args: sha2::Sha256::digest(canonical.as_bytes()).into(),
        }
    }

    /// Why a retry asking `retry` may not answer this call, if it may not.
    fn refusal(&self, retry: &Asked) -> Option<String> {
        if self.principal != retry.principal {
            Some(format!(
                "{CONTINUATION_REFUSED}: the requestState was issued to someone else"
            ))
        } else if self.tool != retry.tool {
            Some(format!(
                "{CONTINUATION_REFUSED}: the requestState continues a call of \"{}\"; retry that \
                 call, not \"{}\"",
                self.tool, retry.tool
            ))
        } else if self.args != retry.args {
            Some(format!(
                "{CONTINUATION_REFUSED}: the requestState continues a call of \"{}\" with other \
                 arguments; retry it with the arguments it was asked with",
                self.tool
            ))
        } else {
            None
        }
    }
}

impl RoundCall {
    /// Runs `call` (the one `asked` names) as a task; `asks` receives the requests it makes
    /// for its client, `missing` the capability it needed that its client lacks.
    pub(crate) fn spawn(
        call: impl Future<Output = ToolResult> + Send + 'static,
        asked: Asked,
        asks: mpsc::Receiver<InputAsk>,
        signal: CancellationToken,
        missing: Arc<Mutex<Option<&'static str>>>,
    ) -> Self {
        RoundCall {
            result: tokio::spawn(call),
            asks,
            asks_open: true,
            open: Vec::new(),
            signal,
            missing,
            escalates: false,
            asked: Box::new(asked),
            offered: InputResponses::new(),
        }
    }

    /// Gives the call the answers its request came with (`inputResponses` without a
    /// `requestState`): each answers the request made under its key, when it is a result of
    /// that request's kind.
    pub(crate) fn offered(mut self, responses: InputResponses) -> Self {
        self.offered = responses;
        self
    }

    /// Answers each of `asks` an offered answer is for, and returns those left to ask.
    fn answer_offered(&mut self, asks: Vec<InputAsk>) -> Vec<InputAsk> {
        if self.offered.is_empty() {
            return asks;
        }
        asks.into_iter()
            .filter_map(|ask| {
                let answer = ask
                    .key
                    .as_ref()
                    .and_then(|key| self.offered.remove(key))
                    .filter(|answer| answers(&ask.request, answer));
                match answer {
                    // The call may have ended meanwhile; then nobody needs the answer.
                    Some(answer) => {
                        let _ = ask.reply.send(answer);
                        None
                    }
                    None => Some(ask),
                }
            })
            .collect()
    }

    /// Marks the call to become a task once a retry has answered its requests.
    pub(crate) fn escalating(mut self, escalates: bool) -> Self {
        self.escalates = escalates;
        self
    }

    /// Whether the call should become a task now: it escalates and no request is open.
    pub(crate) fn ready_for_task(&self) -> bool {
        self.escalates && self.open.is_empty()
    }

    /// The running call as a task takes it over: its result, its requests for the client
    /// and its signal.
    pub(crate) fn into_task(
        self,
    ) -> (
        JoinHandle<ToolResult>,
        mpsc::Receiver<InputAsk>,
        CancellationToken,
    ) {
        (self.result, self.asks, self.signal)
    }
}

/// What one `tools/call` request answers.
pub(crate) enum Turn {
    /// The call settled.
    Done(ToolResult),
    /// The call waits for its client: send this, the client retries with the answers.
    Input(InputRequiredResult),
}

struct Waiting {
    call: RoundCall,
    expiry: JoinHandle<()>,
}

/// The calls of one server that wait for their client's retry, by `requestState`.
#[derive(Default)]
pub(crate) struct Rounds {
    waiting: Mutex<HashMap<String, Waiting>>,
}

impl Rounds {
    /// Drives `call` until it settles or needs its client. `request` is the signal of the
    /// request being answered: the client cancelling it cancels the call.
    pub(crate) async fn drive(
        self: &Arc<Self>,
        mut call: RoundCall,
        request: CancellationToken,
    ) -> Turn {
        // Requests the client's retry left unanswered are asked again at once (SEP-2322: a
        // server re-requests what is missing instead of failing).
        if !call.open.is_empty() {
            let unanswered = std::mem::take(&mut call.open);
            match self.park(call, Vec::new(), unanswered) {
                Ok(turn) => return turn,
                Err(back) => call = back,
            }
        }
        loop {
            let asks = tokio::select! {
                biased;
                result = &mut call.result => {
                    return Turn::Done(result.unwrap_or_else(|error| {
                        ToolResult::failure(crate::result::ToolFailure::plain(format!(
                            "the call's task failed: {error}"
                        )))
                    }));
                }
                ask = call.asks.recv(), if call.asks_open => match ask {
                    Some(ask) => {
                        let mut asks = vec![ask];
                        while let Ok(more) = call.asks.try_recv() {
                            asks.push(more);
                        }
                        asks
                    }
                    None => {
                        call.asks_open = false;
                        continue;
                    }
                },
                () = request.cancelled(), if !call.signal.is_cancelled() => {
                    call.signal.cancel();
                    continue;
                }
            };
            let asks = call.answer_offered(asks);
            if asks.is_empty() {
                continue;
            }
            match self.park(call, asks, Vec::new()) {
                Ok(turn) => return turn,
                Err(back) => call = back,
            }
        }
    }

    /// Parks `call` with the new requests `asks` and the still unanswered `again` for its
    /// client, and returns the `input_required` answer. A request is sent under the key its
    /// tool chose, or `input-N` when it chose none or another request of the round has it.
    /// When too many calls wait already the requests are dropped (so they fail) and the call
    /// comes back to be driven on.
    fn park(
        self: &Arc<Self>,
        mut call: RoundCall,
        asks: Vec<InputAsk>,
        again: Vec<(String, InputRequest, oneshot::Sender<Value>)>,
    ) -> Result<Turn, RoundCall> {
        let mut waiting = self.waiting.lock();
        let state = match random_handle() {
            Some(state) if waiting.len() < MAX_WAITING => state,
            _ => {
                tracing::warn!(target: "dsh_tool_mcp::mcp_server", "a call cannot wait for its client ({MAX_WAITING} wait already, or no random handle); its request fails");
                return Err(call);
            }
        };
        let mut requests = InputRequests::new();
        call.open = again;
        for (key, request, _) in &call.open {
            requests.insert(key.clone(), request.clone());
        }
        for ask in asks {
            let key = ask
                .key
                .filter(|key| !requests.contains_key(key))
                .unwrap_or_else(|| {
                    (requests.len()..)
                        .map(|n| format!("input-{n}"))
                        .find(|key| !requests.contains_key(key))
                        .unwrap_or_default()
                });
            requests.insert(key.clone(), ask.request.clone());
            call.open.push((key, ask.request, ask.reply));
        }
        let rounds = Arc::downgrade(self);
        let expired = state.clone();
        let expiry = tokio::spawn(async move {
            tokio::time::sleep(INPUT_WAIT).await;
            let Some(rounds) = rounds.upgrade() else {
                return;
            };
            let gone = rounds.waiting.lock().remove(&expired);
            if let Some(gone) = gone {
                // Its requests fail (their senders drop) and the call ends cancelled.
                gone.call.signal.cancel();
            }
        });
        waiting.insert(state.clone(), Waiting { call, expiry });
        Ok(Turn::Input(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }

    /// The call waiting under `state`, given the `responses` of the retry `retry`: each
    /// request answered (with a result of its kind) gets its answer; those left unanswered
    /// stay open, to be asked again.
    ///
    /// # Errors
    /// The message for a `requestState` no call waits under (unknown, answered or expired),
    /// and — `CONTINUATION_REFUSED`, the call still waiting for its own retry — for a retry by
    /// another principal or of another tool or other arguments than the call was asked for.
    pub(crate) fn resume(
        &self,
        state: &str,
        retry: &Asked,
        mut responses: InputResponses,
    ) -> Result<RoundCall, String> {
        let Waiting { mut call, expiry } = {
            let mut waiting = self.waiting.lock();
            let unknown = || {
                "no call waits under this requestState (unknown, already answered, or expired)"
                    .to_owned()
            };
            let asked = &waiting.get(state).ok_or_else(unknown)?.call.asked;
            if let Some(refusal) = asked.refusal(retry) {
                return Err(refusal);
            }
            waiting.remove(state).ok_or_else(unknown)?
        };
        expiry.abort();
        let mut unanswered = Vec::new();
        for (key, request, reply) in call.open.drain(..) {
            match responses
                .remove(&key)
                .filter(|answer| answers(&request, answer))
            {
                // The call may have ended meanwhile; then nobody needs the answer.
                Some(answer) => {
                    let _ = reply.send(answer);
                }
                None => unanswered.push((key, request, reply)),
            }
        }
        call.open = unanswered;
        Ok(call)
    }
}

/// Whether `answer` is a result of the kind `request` asks for (an elicitation's, a sampling
/// request's, a roots listing's): anything else answers nothing. A request of a later kind
/// takes any answer, as before this check.
#[allow(deprecated)] // rmcp marks sampling and roots deprecated for later revisions; 2026-07-28 has them
fn answers(request: &InputRequest, answer: &Value) -> bool {
    use rmcp::model::{CreateMessageResult, ElicitResult, ListRootsResult};
    let answer = answer.clone();
    match request {
        InputRequest::CreateMessage(_) => {
            serde_json::from_value::<CreateMessageResult>(answer).is_ok()
        }
        InputRequest::Elicitation(_) => serde_json::from_value::<ElicitResult>(answer).is_ok(),
        InputRequest::ListRoots(_) => serde_json::from_value::<ListRootsResult>(answer).is_ok(),
        _ => true,
    }
}

/// 128 random bits as hex: a handle nobody can guess.
pub(crate) fn random_handle() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}
