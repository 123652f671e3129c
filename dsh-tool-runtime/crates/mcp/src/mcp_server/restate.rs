//! Served `run_code` calls run on Restate: each is an invocation of the durable-runs handler
//! (`DurableRuns/run`), started through the Restate ingress, and as an MCP task its id is the
//! invocation id with a tag: `inv_….` and 32 hex digits, an HMAC-SHA256 (RFC 2104) of the
//! invocation id under the replicas' secret ([`McpRestate::secret`]). `tasks/get` and
//! `tasks/cancel` answer only ids whose tag checks, of invocations of `DurableRuns`; they ask
//! Restate (the ingress's output API, the admin API's SQL query and kill), so any server with
//! the same Restate and the same secret answers for any task: replicas share nothing else.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::task_manager::current_timestamp;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::code_mode::render::render_output;
use crate::durable::Principal;
use crate::durable::restate::{HANDLER, SERVICE};

/// Where [`McpServeOptions::restate`](super::McpServeOptions::restate) runs `run_code`: a
/// Restate server's ingress and admin API, both `http://` URLs (TLS is not built in: keep
/// them on a private network or behind a TLS-terminating proxy), and the secret that tags the
/// ids of the tasks the replicas start.
#[derive(Clone)]
pub struct McpRestate {
    /// The ingress, e.g. `http://127.0.0.1:8080` (Restate's default port 8080).
    pub ingress: String,
    /// The admin API, e.g. `http://127.0.0.1:9070` (Restate's default port 9070).
    pub admin: String,
    /// The replicas' shared secret ([`McpRestate::secret`]); `None`: one made for this server.
    secret: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for McpRestate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRestate")
            .field("ingress", &self.ingress)
            .field("admin", &self.admin)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

/// Bytes of the HMAC kept in a task id: 128 bits.
const TAG_BYTES: usize = 16;

impl McpRestate {
    /// The fewest bytes a secret given to [`McpRestate::secret`] may have: 256 bits.
    pub const MIN_SECRET_BYTES: usize = 32;

    /// Restate at `ingress` and `admin` (trailing slashes are dropped), with a secret made for
    /// this server: its tasks are answered by it alone.
    pub fn new(ingress: impl Into<String>, admin: impl Into<String>) -> Self {
        let trim = |url: String| url.trim_end_matches('/').to_owned();
        McpRestate {
            ingress: trim(ingress.into()),
            admin: trim(admin.into()),
            secret: None,
        }
    }

    /// The secret the replicas of one deployment share (at least [`McpRestate::MIN_SECRET_BYTES`] bytes,
    /// random; keep it as private as the MCP bearer token). A task id carries an HMAC of its
    /// invocation id under it, so that `tasks/get` and `tasks/cancel` answer only for runs a
    /// replica started: not for an invocation someone started on the ingress directly, nor for
    /// an id computed from an idempotency key. Replicas with the same secret answer for each
    /// other's tasks; a new secret makes the tasks started under the old one unknown. Checked
    /// when serving starts.
    pub fn secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.secret = Some(Arc::from(secret.into()));
        self
    }

    /// Checks that both URLs are `http://` with a host, and that a secret given is long
    /// enough.
    ///
    /// # Errors
    /// The URL that is not, or the secret's length, and why.
    pub(crate) fn check(&self) -> Result<(), String> {
        for (what, url) in [("ingress", &self.ingress), ("admin", &self.admin)] {
            let host = url.strip_prefix("http://").unwrap_or_default();
            if host.is_empty() || host.contains(['?', '#', ' ']) {
                return Err(format!(
                    "the Restate {what} URL \"{url}\" is not http://HOST[:PORT] (TLS is not built \
                     in)"
                ));
            }
        }
        if let Some(secret) = &self.secret
            && secret.len() < McpRestate::MIN_SECRET_BYTES
        {
            return Err(format!(
                "the replicas' secret has {} bytes; at least {} are needed",
                secret.len(),
                McpRestate::MIN_SECRET_BYTES
            ));
        }
        Ok(())
    }
}

/// The most bytes read from one Restate answer: a run's output is capped by its code runtime
/// (64 MiB by default), with room for its JSON.
const MAX_ANSWER_BYTES: usize = 80 << 20;

/// How long a short request to Restate (start, status, kill) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A server's way to Restate: the URLs, one HTTP client (its connections pooled), and the
/// secret that tags its task ids.
#[derive(Clone)]
pub(crate) struct Restate {
    urls: McpRestate,
    http: reqwest::Client,
    poll_interval_ms: u64,
    secret: Arc<[u8]>,
}

/// An answer from Restate: its HTTP status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// What a finished invocation's output API said.
enum Output {
    /// The run's output (`{"logs", "result"}`).
    Value(Value),
    /// The invocation ended with a terminal error (`code`, `message`).
    Failed(u16, String),
    /// Still running.
    NotReady,
    /// Restate knows no such invocation (never was, or its result's retention passed).
    Unknown,
}

impl Restate {
    pub(crate) fn new(urls: McpRestate, poll_interval: Duration) -> Result<Self, String> {
        urls.check()?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| format!("no HTTP client for Restate: {error}"))?;
        let secret = match &urls.secret {
            Some(secret) => secret.clone(),
            None => {
                let mut secret = [0u8; McpRestate::MIN_SECRET_BYTES];
                getrandom::fill(&mut secret).map_err(|error| {
                    format!("no secret for task ids: the random source failed: {error}")
                })?;
                Arc::from(secret.as_slice())
            }
        };
        Ok(Restate {
            urls,
            http,
            poll_interval_ms: poll_interval.as_millis().try_into().unwrap_or(u64::MAX),
            secret,
        })
    }

    /// Whether `id` has the shape of a task id this server resolves through Restate: an
    /// invocation id (`inv_` and letters and digits, so it is safe in a URL path and an SQL
    /// literal), `.`, and a tag of 32 hex digits. Whether the tag checks is for
    /// [`Restate::invocation`].
    pub(crate) fn owns(id: &str) -> bool {
        id.split_once('.').is_some_and(|(invocation, tag)| {
            is_invocation_id(invocation)
                && tag.len() == 2 * TAG_BYTES
                && tag.bytes().all(|b| b.is_ascii_hexdigit())
        })
    }

    /// The HMAC of `invocation` under this server's secret, for the task's `owner` (an OAuth
    /// subject) when it has one: the tag of one owner's task does not check for another.
    fn mac(&self, invocation: &str, owner: Option<&Principal>) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256>>::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        mac.update(b"dsh-tools restate task\0");
        mac.update(invocation.as_bytes());
        if let Some(owner) = owner {
            // An invocation id never holds a NUL byte, so the two parts stay apart.
            mac.update(b"\0");
            mac.update(owner.as_str().as_bytes());
        }
        mac
    }

    /// The task id of the invocation `invocation`, which this server started for `owner`.
    fn task_id(&self, invocation: &str, owner: Option<&Principal>) -> String {
        let tag = self.mac(invocation, owner).finalize().into_bytes();
        let hex: String = tag[..TAG_BYTES]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("{invocation}.{hex}")
    }

    /// The invocation of the task `id` when its tag checks for `owner` (compared in constant
    /// time), so a server with this secret started it for that owner; `None` for any other id.
    fn invocation<'a>(&self, id: &'a str, owner: Option<&Principal>) -> Option<&'a str> {
        let (invocation, tag) = id.split_once('.').filter(|_| Restate::owns(id))?;
        let tag: Vec<u8> = (0..tag.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&tag[at..at + 2], 16))
            .collect::<Result<_, _>>()
            .ok()?;
        self.mac(invocation, owner)
            .verify_truncated_left(&tag)
            .ok()
            .map(|()| invocation)
    }

    /// Sends `request` and reads its answer, at most [`MAX_ANSWER_BYTES`].
    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> Result<Answer, String> {
        let failed = |error: &dyn std::fmt::Display| format!("Restate {what} failed: {error}");
        let mut response = request.send().await.map_err(|error| failed(&error))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| failed(&error))? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(failed(&format!(
                    "its answer exceeds {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer { status, body })
    }

    /// Starts a run of `arguments` (`run_code`'s) as a new invocation; the id of its task, for
    /// `owner` when tasks have owners.
    pub(crate) async fn start(
        &self,
        arguments: &Value,
        owner: Option<&Principal>,
    ) -> Result<String, String> {
        let invocation = self.start_invocation(arguments).await?;
        Ok(self.task_id(&invocation, owner))
    }

    /// Starts a run of `arguments` (`run_code`'s) as a new invocation, under a fresh random
    /// idempotency key (which makes Restate keep its output for `tasks/get`); its id.
    async fn start_invocation(&self, arguments: &Value) -> Result<String, String> {
        let key = super::tasks::uuid_v4()
            .map_err(|error| format!("no idempotency key: the random source failed: {error}"))?;
        let url = format!("{}/{SERVICE}/{HANDLER}/send", self.urls.ingress);
        let request = self
            .http
            .post(url)
            .timeout(REQUEST_TIMEOUT)
            .header("idempotency-key", key)
            .json(arguments);
        let answer = self.send(request, "ingress (start a run)").await?;
        let started: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        match started["invocationId"].as_str() {
            Some(id) if (200..300).contains(&answer.status) && is_invocation_id(id) => {
                Ok(id.to_owned())
            }
            _ => Err(format!(
                "the Restate ingress did not start the run (HTTP {}): {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )),
        }
    }

    /// The invocation's output: `/restate/invocation/{id}/output`, or `/attach` to wait for it.
    async fn output(&self, id: &str, wait: bool) -> Result<Output, String> {
        let verb = if wait { "attach" } else { "output" };
        let url = format!("{}/restate/invocation/{id}/{verb}", self.urls.ingress);
        let mut request = self.http.get(url);
        if !wait {
            request = request.timeout(REQUEST_TIMEOUT);
        }
        let answer = self.send(request, "ingress (a run's output)").await?;
        let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok(match answer.status {
            200 => Output::Value(body),
            // 400: not an invocation id Restate could have made.
            400 | 404 if body["source"] == "ingress" => Output::Unknown,
            470 => Output::NotReady,
            status if body["source"] == "invocation" => Output::Failed(
                status,
                body["message"].as_str().unwrap_or_default().to_owned(),
            ),
            status => {
                return Err(format!(
                    "the Restate ingress answered HTTP {status} for {id}: {}",
                    String::from_utf8_lossy(&answer.body)
                ));
            }
        })
    }

    /// The invocation's row of `sys_invocation` (status, times, attempts), when Restate's SQL
    /// query answers; `None` otherwise (the status is then reported without it).
    async fn row(&self, id: &str) -> Option<JsonObject> {
        // `id` is an invocation id: letters, digits and `_` only.
        let query = format!(
            "SELECT status, created_at, modified_at, retry_count, journal_size, last_failure, \
             completion_retention, target_service_name, target_handler_name FROM sys_invocation \
             WHERE id = '{id}'"
        );
        let request = self
            .http
            .post(format!("{}/query", self.urls.admin))
            .timeout(REQUEST_TIMEOUT)
            .header("accept", "application/json")
            .json(&json!({ "query": query }));
        let answer = self.send(request, "admin API (query)").await.ok()?;
        let mut rows: Value = serde_json::from_slice(&answer.body).ok()?;
        match rows.get_mut("rows")?.get_mut(0)?.take() {
            Value::Object(row) => Some(row),
            _ => None,
        }
    }

    /// `tasks/get` of the task `id`, asked by `owner` when tasks have owners.
    ///
    /// # Errors
    /// `-32602` for an id whose tag does not check (another owner's included), of an invocation
    /// of another handler than `DurableRuns/run`, or that Restate does not know; `-32603` when
    /// Restate cannot be asked.
    pub(crate) async fn get(
        &self,
        id: &str,
        owner: Option<&Principal>,
    ) -> Result<GetTaskResult, ErrorData> {
        let invocation = self
            .invocation(id, owner)
            .ok_or_else(|| super::tasks::unknown(id))?;
        let (output, row) = tokio::join!(self.output(invocation, false), self.row(invocation));
        let row = row.unwrap_or_default();
        // The tag says a replica started it; Restate's record must say the same handler.
        if !runs_here(&row) {
            return Err(super::tasks::unknown(id));
        }
        let output = output.map_err(|message| ErrorData::internal_error(message, None))?;
        let text = |key: &str| row.get(key).and_then(Value::as_str).map(str::to_owned);
        let now = current_timestamp();
        let mut task = Task::new(
            id,
            TaskStatus::Working,
            text("created_at").unwrap_or_else(|| now.clone()),
            text("modified_at").unwrap_or(now),
        );
        task.poll_interval_ms = Some(self.poll_interval_ms);
        let payload = match output {
            Output::Unknown => return Err(super::tasks::unknown(id)),
            Output::NotReady => {
                task.status_message = Some(status_message(&row));
                TaskPayload::Working
            }
            ended => {
                // Kept for the retention Restate reports (from the run's end, so the task lives
                // at least this long from its creation).
                task.ttl_ms = text("completion_retention")
                    .as_deref()
                    .and_then(retention_ms);
                match ended_result(ended) {
                    Some(result) => TaskPayload::Completed {
                        result: super::tasks::object(&result),
                    },
                    None => TaskPayload::Cancelled,
                }
            }
        };
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    /// `tasks/cancel` of the task `id`: Restate kills its invocation. (Restate's graceful cancel
    /// reaches a handler only at its next journaled step, so a program computing between
    /// binding calls would not stop.) The deployment running it drops the run, whose program
    /// is stopped; a binding call it was making is cut off, its effect unknown. An ended
    /// invocation stays as it ended.
    ///
    /// # Errors
    /// `-32602` for an id whose tag does not check (another owner's included), of an invocation
    /// of another handler than `DurableRuns/run`, or that Restate does not know; `-32603` when
    /// Restate cannot be asked.
    pub(crate) async fn cancel(
        &self,
        id: &str,
        owner: Option<&Principal>,
    ) -> Result<(), ErrorData> {
        let invocation = self
            .invocation(id, owner)
            .ok_or_else(|| super::tasks::unknown(id))?;
        if !runs_here(&self.row(invocation).await.unwrap_or_default()) {
            return Err(super::tasks::unknown(id));
        }
        self.kill(invocation).await.map_err(|error| match error {
            None => super::tasks::unknown(id),
            Some(error) => error,
        })
    }

    /// Kills the invocation `id`. Errors: `None` when Restate does not know it, else why it
    /// could not be killed.
    async fn kill(&self, id: &str) -> Result<(), Option<ErrorData>> {
        let url = format!("{}/invocations/{id}/kill", self.urls.admin);
        let request = self.http.patch(url).timeout(REQUEST_TIMEOUT);
        let answer = self
            .send(request, "admin API (kill)")
            .await
            .map_err(|message| Some(ErrorData::internal_error(message, None)))?;
        if (200..300).contains(&answer.status) {
            return Ok(());
        }
        match self.output(id, false).await {
            // Ended already: nothing to kill.
            Ok(Output::Value(_) | Output::Failed(..)) => Ok(()),
            Ok(Output::Unknown) => Err(None),
            _ => Err(Some(ErrorData::internal_error(
                format!(
                    "the Restate admin API answered HTTP {} to killing {id}: {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                ),
                None,
            ))),
        }
    }

    /// Starts a run and waits for its result, as a plain (non-task) `tools/call` does. When
    /// `signal` fires (the client cancelled), the invocation is killed and the call reads as
    /// aborted.
    pub(crate) async fn call(
        &self,
        arguments: &Value,
        signal: &CancellationToken,
    ) -> CallToolResult {
        let id = match self.start_invocation(arguments).await {
            Ok(id) => id,
            Err(message) => return error_result(format!("run_code on Restate: {message}")),
        };
        let waited = tokio::select! {
            waited = self.output(&id, true) => waited,
            () = signal.cancelled() => {
                let _ = self.kill(&id).await;
                return error_result("ABORTED: tool call aborted".to_owned());
            }
        };
        match waited {
            Ok(Output::NotReady | Output::Unknown) => error_result(format!(
                "run_code on Restate: the invocation {id} vanished before it ended"
            )),
            Ok(ended) => ended_result(ended)
                .unwrap_or_else(|| error_result(format!("ABORTED: invocation {id} was cancelled"))),
            Err(message) => error_result(format!(
                "run_code on Restate: {message}; the run goes on as invocation {id}"
            )),
        }
    }
}

/// Whether `id` is an invocation id: `inv_` and letters and digits, so it is safe in a URL path
/// and an SQL literal.
fn is_invocation_id(id: &str) -> bool {
    id.strip_prefix("inv_").is_some_and(|rest| {
        !rest.is_empty() && rest.len() <= 64 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Whether Restate's row of an invocation (empty when the admin API did not answer) names the
/// handler runs are started on.
fn runs_here(row: &JsonObject) -> bool {
    let named = |key: &str, value: &str| row.get(key).is_none_or(|named| named == value);
    named("target_service_name", SERVICE) && named("target_handler_name", HANDLER)
}

/// The task that `start` made: working, its id the one `start` answered.
pub(crate) fn created(id: String, poll_interval: Duration) -> CreateTaskResult {
    let now = current_timestamp();
    let mut task = Task::new(id, TaskStatus::Working, now.clone(), now);
    task.poll_interval_ms = Some(poll_interval.as_millis().try_into().unwrap_or(u64::MAX));
    CreateTaskResult::new(task)
}

/// The `tools/call` result of an ended invocation: `run_code`'s content and structured output
/// for a value, an `isError` result for a failure; `None` when it was killed or cancelled
/// (Restate's code 409).
fn ended_result(output: Output) -> Option<CallToolResult> {
    match output {
        Output::Value(value) => {
            let text = render_output(&value);
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(value);
            Some(result)
        }
        Output::Failed(409, _) => None,
        // The handler's terminal error reads `CODE: message`, as the pipeline's failures do.
        Output::Failed(_, message) => Some(error_result(message)),
        Output::NotReady | Output::Unknown => None,
    }
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("Error: {message}"))])
}

/// A working invocation's `statusMessage`: its Restate status, attempt and journal size, and
/// the failure a retry follows.
fn status_message(row: &JsonObject) -> String {
    let Some(status) = row.get("status").and_then(Value::as_str) else {
        return "working".to_owned();
    };
    let mut message = status.to_owned();
    if let Some(attempt) = row.get("retry_count").and_then(Value::as_u64) {
        message.push_str(&format!(", attempt {attempt}"));
    }
    if let Some(entries) = row.get("journal_size").and_then(Value::as_u64) {
        message.push_str(&format!(", {entries} journal entries"));
    }
    if let Some(failure) = row.get("last_failure").and_then(Value::as_str) {
        message.push_str(&format!("; last failure: {failure}"));
    }
    message
}

/// Milliseconds of an ISO 8601 duration of whole seconds (`PT86400S`, as Restate reports
/// retentions); `None` for any other shape.
fn retention_ms(duration: &str) -> Option<u64> {
    duration
        .strip_prefix("PT")?
        .strip_suffix('S')?
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000)
}

#[cfg(test)]
mod tests;
