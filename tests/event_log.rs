//! The JSON-lines event log (SPEC §10): every call's events land in the file, plain or zstd.

mod common;

use common::{call, mirror};
use dsh_tools::Registry;
use dsh_tools::events::EventLog;
use serde_json::{Value, json};

async fn log_three_calls(file: &std::path::Path) -> u64 {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let log = EventLog::start(&registry, file).unwrap();
    for n in 0..3 {
        registry
            .execute(call(&format!("c{n}"), "m", json!({ "n": n })))
            .await;
    }
    registry.execute(call("x", "missing", json!({}))).await;
    log.finish().await.unwrap()
}

fn check(lines: &str) {
    let events: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "call", "result", "call", "result", "call", "result", "call", "result"
        ]
    );
    assert_eq!(events[1]["call_id"], "c0");
    assert_eq!(events[1]["result"]["status"], "success");
    assert_eq!(events[1]["result"]["value"], json!({"n": 0}));
    assert_eq!(events[7]["result"]["error"]["info"]["code"], "UNKNOWN_TOOL");
}

#[tokio::test]
async fn plain_and_zstd_logs_hold_every_event() {
    let dir = std::env::temp_dir().join(format!("dsh-event-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("events.jsonl");
    assert_eq!(log_three_calls(&plain).await, 8);
    check(&std::fs::read_to_string(&plain).unwrap());
    let compressed = dir.join("events.jsonl.zst");
    assert_eq!(log_three_calls(&compressed).await, 8);
    let bytes = std::fs::read(&compressed).unwrap();
    assert_eq!(&bytes[..4], [0x28, 0xB5, 0x2F, 0xFD], "a zstd frame");
    check(&String::from_utf8(zstd::decode_all(&bytes[..]).unwrap()).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn an_unwritable_path_is_an_error() {
    let registry = Registry::new();
    assert!(EventLog::start(&registry, "/nonexistent-dir/events.jsonl").is_err());
}
