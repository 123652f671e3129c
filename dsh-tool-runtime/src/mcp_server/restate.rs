//! Served `run_code` calls run on Restate: each is an invocation of the durable-runs handler
//! (`DurableRuns/run`), started through the Restate ingress, and as an MCP task its id is the
//! invocation id. `tasks/get` and `tasks/cancel` ask Restate (the ingress's output API, the
//! admin API's SQL query and kill), so any server configured with the same Restate answers for
//! any task: replicas share nothing of their own.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::task_manager::current_timestamp;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::code_mode::render::render_output;
use crate::durable::restate::{HANDLER, SERVICE};

/// Where [`McpServeOptions::restate`](super::McpServeOptions::restate) runs `run_code`: a
/// Restate server's ingress and admin API, both `http://` URLs (TLS is not built in: keep
/// them on a private network or behind a TLS-terminating proxy).
#[derive(Debug, Clone)]
pub struct McpRestate {
    /// The ingress, e.g. `http://127.0.0.1:8080` (Restate's default port 8080).
    pub ingress: String,
    /// The admin API, e.g. `http://127.0.0.1:9070` (Restate's default port 9070).
    pub admin: String,
}

impl McpRestate {
    /// Restate at `ingress` and `admin` (trailing slashes are dropped).
    pub fn new(ingress: impl Into<String>, admin: impl Into<String>) -> Self {
        let trim = |url: String| url.trim_end_matches('/').to_owned();
        McpRestate {
            ingress: trim(ingress.into()),
            admin: trim(admin.into()),
        }
    }

    /// Checks that both URLs are `http://` with a host.
    ///
    /// # Errors
    /// The URL that is not, and why.
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
        Ok(())
    }
}

/// The most bytes read from one Restate answer: a run's output is capped by its code runtime
/// (64 MiB by default), with room for its JSON.
const MAX_ANSWER_BYTES: usize = 80 << 20;

/// How long a short request to Restate (start, status, kill) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A server's way to Restate: the URLs and one HTTP client (its connections pooled).
#[derive(Clone)]
pub(crate) struct Restate {
    urls: McpRestate,
    http: reqwest::Client,
    poll_interval_ms: u64,
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
        Ok(Restate {
            urls,
            http,
            poll_interval_ms: poll_interval.as_millis().try_into().unwrap_or(u64::MAX),
        })
    }

    /// Whether `id` is an invocation id this server resolves through Restate: `inv_` and
    /// letters and digits (so it is safe in a URL path and an SQL literal).
    pub(crate) fn owns(id: &str) -> bool {
        id.strip_prefix("inv_").is_some_and(|rest| {
            !rest.is_empty() && rest.len() <= 64 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
        })
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

    /// Starts a run of `arguments` (`run_code`'s) as a new invocation, under a fresh random
    /// idempotency key (which makes Restate keep its output for `tasks/get`); its id.
    pub(crate) async fn start(&self, arguments: &Value) -> Result<String, String> {
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
            Some(id) if (200..300).contains(&answer.status) && Restate::owns(id) => {
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
        // `id` passed `owns`: letters, digits and `_` only.
        let query = format!(
            "SELECT status, created_at, modified_at, retry_count, journal_size, last_failure, \
             completion_retention FROM sys_invocation WHERE id = '{id}'"
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

    /// `tasks/get` of the invocation `id`.
    ///
    /// # Errors
    /// `-32602` for an id Restate does not know; `-32603` when Restate cannot be asked.
    pub(crate) async fn get(&self, id: &str) -> Result<GetTaskResult, ErrorData> {
        let (output, row) = tokio::join!(self.output(id, false), self.row(id));
        let output = output.map_err(|message| ErrorData::internal_error(message, None))?;
        let row = row.unwrap_or_default();
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

    /// `tasks/cancel` of the invocation `id`: Restate kills it. (Restate's graceful cancel
    /// reaches a handler only at its next journaled step, so a program computing between
    /// binding calls would not stop.) The deployment running it drops the run, whose program
    /// is stopped; a binding call it was making is cut off, its effect unknown. An ended
    /// invocation stays as it ended.
    ///
    /// # Errors
    /// `-32602` for an id Restate does not know; `-32603` when Restate cannot be asked.
    pub(crate) async fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let url = format!("{}/invocations/{id}/kill", self.urls.admin);
        let request = self.http.patch(url).timeout(REQUEST_TIMEOUT);
        let answer = self
            .send(request, "admin API (kill)")
            .await
            .map_err(|message| ErrorData::internal_error(message, None))?;
        if (200..300).contains(&answer.status) {
            return Ok(());
        }
        match self.output(id, false).await {
            // Ended already: nothing to kill.
            Ok(Output::Value(_) | Output::Failed(..)) => Ok(()),
            Ok(Output::Unknown) => Err(super::tasks::unknown(id)),
            _ => Err(ErrorData::internal_error(
                format!(
                    "the Restate admin API answered HTTP {} to killing {id}: {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                ),
                None,
            )),
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
        let id = match self.start(arguments).await {
            Ok(id) => id,
            Err(message) => return error_result(format!("run_code on Restate: {message}")),
        };
        let waited = tokio::select! {
            waited = self.output(&id, true) => waited,
            () = signal.cancelled() => {
                let _ = self.cancel(&id).await;
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

/// The task that `start` made: working, its id the invocation's.
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
mod tests {
    use super::*;

    #[test]
    fn only_invocation_ids_are_resolved_through_restate() {
        assert!(Restate::owns("inv_1axOHcZ8EYYs1l7B8zvJcT7bRlfVDrD0xB"));
        for other in [
            "inv_",
            "5c1b0b9e-4a6f-4c38-9d2e-0c1f0e7b2a11",
            "inv_1' OR '1'='1",
            "inv_../../admin",
            &format!("inv_{}", "a".repeat(65)),
        ] {
            assert!(!Restate::owns(other), "{other}");
        }
    }

    #[test]
    fn urls_must_be_plain_http() {
        assert!(
            McpRestate::new("http://127.0.0.1:8080/", "http://r:9070")
                .check()
                .is_ok()
        );
        let refused = McpRestate::new("https://r:8080", "http://r:9070").check();
        assert!(
            refused
                .unwrap_err()
                .contains("ingress URL \"https://r:8080\"")
        );
        assert!(McpRestate::new("http://r:8080", "r:9070").check().is_err());
    }

    #[test]
    fn retentions_and_status_messages_read_restates_rows() {
        assert_eq!(retention_ms("PT86400S"), Some(86_400_000));
        assert_eq!(retention_ms("P1D"), None);
        let row = json!({"status": "backing-off", "retry_count": 3, "journal_size": 7,
                          "last_failure": "[503] unavailable"});
        assert_eq!(
            status_message(row.as_object().unwrap()),
            "backing-off, attempt 3, 7 journal entries; last failure: [503] unavailable"
        );
        assert_eq!(status_message(&JsonObject::new()), "working");
    }

    #[test]
    fn ended_invocations_become_tool_results() {
        let done = ended_result(Output::Value(json!({"logs": ["hi"], "result": 42}))).unwrap();
        assert_eq!(done.is_error, Some(false));
        assert_eq!(done.content[0].as_text().unwrap().text, "hi\n42");
        assert_eq!(done.structured_content.unwrap()["result"], 42);
        let failed = ended_result(Output::Failed(500, "CODE_RUN_FAILED: boom".into())).unwrap();
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            failed.content[0].as_text().unwrap().text,
            "Error: CODE_RUN_FAILED: boom"
        );
        assert!(ended_result(Output::Failed(409, "killed".into())).is_none());
    }
}
