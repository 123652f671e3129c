//! `runs --restate`: durable runs parked on Restate, through its ingress. A parked run's
//! approval is the state of the virtual object `DurableApprovals` keyed by the run's key; its
//! handlers `pending`, `approve` and `deny` are called here, and `list` reads every key's
//! approval with Restate's admin SQL API (`POST /query`). `show` signs a continuation for the
//! waiting call with the deployment's secret (`--restate-secret-file`); `approve` and `deny` send it,
//! and the deployment checks it. The run itself goes on in Restate: nothing runs in this process.

use std::path::Path;
use std::time::Duration;

use dsh_tools::durable::{ContinuationSecret, DEFAULT_CONTINUATION_TTL, continuation_run};

use serde_json::{Value, json};

use crate::args::RunsAction;
use crate::terminal::{escaped, pretty};

/// How long one request may wait: an approval to a run whose deployment is down is answered
/// once a deployment serves it again.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The object holding the approvals.
const APPROVALS: &str = "DurableApprovals";

/// `runs --restate INGRESS [--restate-admin ADMIN] ACTION`: what to print, or one error line.
pub(crate) async fn runs(
    ingress: &str,
    admin: Option<&str>,
    secret: Option<&Path>,
    action: &RunsAction,
    json_output: bool,
) -> Result<String, String> {
    // Read first: a secret file that is refused fails before Restate is asked anything.
    let secret = secret
        .map(crate::secret_file::read_restate_secret)
        .transpose()?
        .map(|shared| ContinuationSecret::derive(&shared));
    let http = reqwest::Client::builder()
        .timeout(ANSWER_WITHIN)
        .build()
        .map_err(|error| format!("runs --restate: {error}"))?;
    match action {
        RunsAction::List => {
            let admin = admin.ok_or(
                "runs --restate ... list needs --restate-admin ADMIN_URL (Restate's admin API, \
                 e.g. http://127.0.0.1:9070): the parked runs are found with its SQL query",
            )?;
            let rows = list(&http, admin).await?;
            if json_output {
                return Ok(pretty(&Value::Array(rows)));
            }
            let lines: Vec<String> = rows.iter().map(pending_line).collect();
            Ok(if lines.is_empty() {
                "no runs parked".to_owned()
            } else {
                lines.join("\n")
            })
        }
        RunsAction::Show { id } => {
            let mut pending = post(&http, &object_url(ingress, id, "pending")?, None).await?;
            if pending.is_null() {
                return Ok(if json_output {
                    pretty(&pending)
                } else {
                    format!("{} has no approval pending", escaped(id))
                });
            }
            let continuation = match &secret {
                Some(secret) => Some(sign(secret, &pending)?),
                None => None,
            };
            if json_output {
                if let Some(continuation) = continuation {
                    pending["continuation"] = Value::from(continuation);
                }
                return Ok(pretty(&pending));
            }
            Ok(match continuation {
                Some(continuation) => {
                    format!("{}\ncontinuation: {continuation}", pending_line(&pending))
                }
                None => format!(
                    "{}\n(give --restate-secret-file FILE, the deployment's secret, for a continuation \
                     that approves or denies it)",
                    pending_line(&pending)
                ),
            })
        }
        RunsAction::Approve { id } => {
            let body = json!({ "continuation": id });
            let url = object_url(ingress, &run_of(id)?, "approve")?;
            let decided = post(&http, &url, Some(&body)).await?;
            Ok(decided_text(&decided, json_output))
        }
        RunsAction::Deny { id, reason } => {
            let body = json!({ "continuation": id, "reason": reason });
            let url = object_url(ingress, &run_of(id)?, "deny")?;
            let decided = post(&http, &url, Some(&body)).await?;
            Ok(decided_text(&decided, json_output))
        }
        RunsAction::Resume { .. } | RunsAction::Rollback { .. } => Err(
            "runs --restate: resume and rollback are for journal files; Restate retries a run \
             cut off by itself"
                .to_owned(),
        ),
    }
}

/// A continuation for the local owner deciding `pending`'s call, signed with `secret`, the key
/// the deployment derives from the secret file (`--restate-secret-file`).
fn sign(secret: &ContinuationSecret, pending: &Value) -> Result<String, String> {
    let (Some(run), Some(seq), Some(digest)) = (
        pending["run"].as_str(),
        pending["seq"].as_u64(),
        pending["digest"].as_str(),
    ) else {
        return Err(format!(
            "the pending approval Restate holds names no run, call and digest: {pending}"
        ));
    };
    Ok(secret.sign_for_owner(run, seq, digest, DEFAULT_CONTINUATION_TTL))
}

/// The run key `continuation` names.
fn run_of(continuation: &str) -> Result<String, String> {
    continuation_run(continuation).ok_or_else(|| {
        format!(
            "{} is not a continuation: `runs --restate INGRESS --restate-secret-file FILE show KEY` \
             prints the one for a parked run",
            escaped(continuation)
        )
    })
}

/// `INGRESS/DurableApprovals/KEY/HANDLER`, the key one escaped path segment.
fn object_url(ingress: &str, key: &str, handler: &str) -> Result<reqwest::Url, String> {
    // Checked here, as the run itself checks its key: a URL parser drops tabs and newlines,
    // which would turn `a\tb` into another run's key `ab`.
    if key.is_empty() || key.len() > 256 || key.chars().any(char::is_control) {
        return Err(format!(
            "run key {}: expected 1 to 256 bytes without control characters",
            escaped(key)
        ));
    }
    let mut url = reqwest::Url::parse(ingress)
        .map_err(|error| format!("--restate {}: {error}", escaped(ingress)))?;
    url.path_segments_mut()
        .map_err(|()| format!("--restate {}: not an http(s) URL", escaped(ingress)))?
        .pop_if_empty()
        .extend([APPROVALS, key, handler]);
    Ok(url)
}

/// Every pending approval, from the admin API's SQL query of the object's state.
async fn list(http: &reqwest::Client, admin: &str) -> Result<Vec<Value>, String> {
    let mut url = reqwest::Url::parse(admin)
        .map_err(|error| format!("--restate-admin {}: {error}", escaped(admin)))?;
    url.path_segments_mut()
        .map_err(|()| format!("--restate-admin {}: not an http(s) URL", escaped(admin)))?
        .pop_if_empty()
        .push("query");
    let query = json!({
        "query": format!(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = '{APPROVALS}' \
             AND key = 'pending' ORDER BY service_key"
        )
    });
    let answer = post(http, &url, Some(&query)).await?;
    let rows = answer["rows"]
        .as_array()
        .ok_or_else(|| format!("Restate's admin API answered without rows: {answer}"))?;
    rows.iter()
        .map(|row| {
            row["value_utf8"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .ok_or_else(|| format!("a pending approval Restate holds is not JSON: {row}"))
        })
        .collect()
}

/// POSTs `body` (JSON, or nothing) to `url`; the answer's JSON, or one line saying why not.
async fn post(
    http: &reqwest::Client,
    url: &reqwest::Url,
    body: Option<&Value>,
) -> Result<Value, String> {
    let mut request = http.post(url.clone()).header("accept", "application/json");
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request
        .send()
        .await
        .map_err(|error| unreachable(url, &error))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|error| unreachable(url, &error))?;
    let value: Option<Value> = serde_json::from_str(&text).ok();
    if status.is_success() {
        return value.ok_or_else(|| format!("{url} answered with something other than JSON"));
    }
    let message = value
        .as_ref()
        .and_then(|value| value["message"].as_str())
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    Err(format!("Restate answered {status}: {message}"))
}

fn unreachable(url: &reqwest::Url, error: &reqwest::Error) -> String {
    if error.is_timeout() {
        format!(
            "Restate at {url} did not answer within {} s (is a deployment serving {APPROVALS} \
             registered and up?)",
            ANSWER_WITHIN.as_secs()
        )
    } else {
        format!("cannot reach Restate at {url}: {error}")
    }
}

/// `KEY parked at call #N TOOL(ARGS): REASON`.
fn pending_line(pending: &Value) -> String {
    let text = |key: &str| escaped(pending[key].as_str().unwrap_or_default());
    format!(
        "{} parked at call #{} {}({}): {}",
        text("run"),
        pending["seq"],
        text("tool"),
        text("args"),
        match pending["reason"].as_str() {
            Some(reason) => escaped(reason),
            None => "approval required".to_owned(),
        }
    )
}

fn decided_text(decided: &Value, json_output: bool) -> String {
    if json_output {
        return pretty(decided);
    }
    let verdict = match decided["decision"].as_str() {
        Some("approved") => "approved".to_owned(),
        _ => format!(
            "denied ({})",
            escaped(decided["reason"].as_str().unwrap_or_default())
        ),
    };
    format!(
        "{} call #{} {} of run {}: the run goes on in Restate",
        verdict,
        decided["seq"],
        escaped(decided["tool"].as_str().unwrap_or_default()),
        escaped(decided["run"].as_str().unwrap_or_default())
    )
}
