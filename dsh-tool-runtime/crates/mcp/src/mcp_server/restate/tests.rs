//! Task ids, Restate's rows and answers, without a Restate server.

use super::*;

fn restate(secret: Option<&[u8]>) -> Restate {
    let mut urls = McpRestate::new("http://127.0.0.1:8080", "http://127.0.0.1:9070");
    if let Some(secret) = secret {
        urls = urls.secret(secret);
    }
    Restate::new(urls, Duration::from_secs(1)).unwrap()
}

#[test]
fn only_tagged_invocation_ids_are_resolved_through_restate() {
    let invocation = "inv_1axOHcZ8EYYs1l7B8zvJcT7bRlfVDrD0xB";
    assert!(is_invocation_id(invocation));
    assert!(!Restate::owns(invocation), "an untagged id");
    assert!(Restate::owns(&format!("{invocation}.{}", "0a".repeat(16))));
    for other in [
        "inv_",
        "5c1b0b9e-4a6f-4c38-9d2e-0c1f0e7b2a11",
        "inv_1' OR '1'='1",
        "inv_../../admin",
        &format!("inv_{}", "a".repeat(65)),
        &format!("inv_1' OR '1'='1.{}", "0a".repeat(16)),
        &format!("{invocation}.{}", "0a".repeat(15)),
        &format!("{invocation}.{}", "zz".repeat(16)),
    ] {
        assert!(!Restate::owns(other), "{other}");
    }
}

#[test]
fn a_task_id_is_answered_only_under_the_secret_that_tagged_it() {
    let shared = [7u8; 32];
    let (a, b) = (restate(Some(&shared)), restate(Some(&shared)));
    let invocation = "inv_1axOHcZ8EYYs1l7B8zvJcT7bRlfVDrD0xB";
    let id = a.task_id(invocation, None);
    assert!(Restate::owns(&id), "{id}");
    assert_eq!(
        b.invocation(&id, None),
        Some(invocation),
        "a replica with the secret"
    );
    // Another secret, a server's own random one, a changed tag or invocation.
    assert_eq!(restate(Some(&[8u8; 32])).invocation(&id, None), None);
    assert_eq!(restate(None).invocation(&id, None), None);
    let mut forged = id.clone();
    let last = if forged.ends_with('0') { '1' } else { '0' };
    forged.pop();
    forged.push(last);
    assert_eq!(a.invocation(&forged, None), None);
    let other = id.replacen("inv_1", "inv_2", 1);
    assert_eq!(a.invocation(&other, None), None);
    assert_eq!(a.invocation(invocation, None), None);
}

/// A task started for an OAuth subject is resolved for that subject only: another subject, or
/// a request with no subject, finds it unknown, and a subject's tag does not pass unowned.
#[test]
fn a_task_id_of_a_subject_is_answered_only_for_that_subject() {
    let a = restate(Some(&[7u8; 32]));
    let invocation = "inv_1axOHcZ8EYYs1l7B8zvJcT7bRlfVDrD0xB";
    let alice = Principal::oauth_subject("https://issuer", "alice");
    let mallory = Principal::oauth_subject("https://issuer", "mallory");
    let id = a.task_id(invocation, Some(&alice));
    assert_eq!(a.invocation(&id, Some(&alice)), Some(invocation));
    assert_eq!(a.invocation(&id, Some(&mallory)), None);
    assert_eq!(a.invocation(&id, None), None);
    let unowned = a.task_id(invocation, None);
    assert_eq!(a.invocation(&unowned, Some(&alice)), None);
}

#[test]
fn a_short_secret_is_refused() {
    let urls = McpRestate::new("http://r:8080", "http://r:9070").secret(vec![1u8; 31]);
    assert!(urls.check().unwrap_err().contains("at least 32"));
    assert!(
        !format!("{urls:?}").contains("1, 1"),
        "the secret is not shown"
    );
}

#[test]
fn only_the_handler_runs_start_on_is_answered() {
    let row = |service: &str, handler: &str| {
        json!({"target_service_name": service, "target_handler_name": handler})
            .as_object()
            .unwrap()
            .clone()
    };
    assert!(runs_here(&row(SERVICE, HANDLER)));
    assert!(!runs_here(&row("DurableApprovals", "approve")));
    assert!(!runs_here(&row(SERVICE, "other")));
    assert!(runs_here(&JsonObject::new()));
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
