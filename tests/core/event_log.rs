//! The JSON-lines event log: every call's events land in the file, plain or zstd.

use crate::common;

use common::{call, mirror};
use dsh_tools::Registry;
use dsh_tools::events::{
    EventLog, LogError, LoggedEvent, ReadLimits, ToolEvent, read_log, read_log_with,
};
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

/// A fresh directory under the target dir.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("event-log")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs three calls (one unknown tool) with a log at `file` still open, and returns what a
/// subscriber saw and the still-running log.
async fn run_logged(file: &std::path::Path) -> (Vec<ToolEvent>, EventLog) {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let log = EventLog::start(&registry, file).unwrap();
    let mut events = registry.subscribe();
    registry.execute(call("c0", "m", json!({ "n": 0 }))).await;
    registry.execute(call("c1", "m", json!({ "n": 1 }))).await;
    registry.execute(call("x", "missing", json!({}))).await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    (seen, log)
}

fn tool_events(logged: Vec<LoggedEvent>) -> Vec<ToolEvent> {
    logged
        .into_iter()
        .map(|event| match event {
            LoggedEvent::Tool(event) => event,
            other => panic!("only tool events were logged: {other:?}"),
        })
        .collect()
}

/// Waits until `file` holds `lines` complete lines; the timeout only bounds a failure.
async fn wait_for_lines(file: &std::path::Path, lines: usize) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.matches('\n').count() >= lines {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the log holds {} of {lines} lines",
            text.matches('\n').count()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_log_reads_back_as_the_published_events() {
    let dir = scratch("round-trip");
    for name in ["events.jsonl", "events.jsonl.zst"] {
        let file = dir.join(name);
        let (published, log) = run_logged(&file).await;
        assert_eq!(log.finish().await.unwrap(), 6);
        let read = tool_events(read_log(&file).unwrap());
        assert_eq!(read, published, "{name}");
        let ToolEvent::Result {
            root_call_id,
            duration_ms,
            at_ms,
            ..
        } = &read[1]
        else {
            panic!("a result event second: {:?}", read[1]);
        };
        assert_eq!(root_call_id, "c0");
        assert!(*duration_ms >= 0.0 && *at_ms > 0);
    }
}

#[tokio::test]
async fn every_line_is_on_disk_before_the_log_is_closed() {
    let dir = scratch("flushed");
    let plain = dir.join("events.jsonl");
    let (published, log) = run_logged(&plain).await;
    let text = wait_for_lines(&plain, published.len()).await;
    assert_eq!(text.lines().count(), published.len());
    log.finish().await.unwrap();

    // A zstd log whose writer never closed it (a killed process) still reads back whole: each
    // line ended a zstd block.
    let compressed = dir.join("events.jsonl.zst");
    let (published, log) = run_logged(&compressed).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let read = read_log(&compressed).map(tool_events).unwrap_or_default();
        if read.len() == published.len() {
            assert_eq!(read, published);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} events readable",
            read.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    drop(log);
}

#[tokio::test]
async fn a_torn_last_line_is_skipped() {
    let dir = scratch("torn");
    let plain = dir.join("events.jsonl");
    let (published, log) = run_logged(&plain).await;
    log.finish().await.unwrap();
    let mut text = std::fs::read_to_string(&plain).unwrap();
    text.push_str("{\"event\":\"call\",\"call_id\":\"c9\",\"na");
    std::fs::write(&plain, &text).unwrap();
    assert_eq!(tool_events(read_log(&plain).unwrap()), published);

    // The same in zstd: the frame is cut inside the block of the last line.
    let compressed = dir.join("events.jsonl.zst");
    let (published, log) = run_logged(&compressed).await;
    log.finish().await.unwrap();
    let bytes = std::fs::read(&compressed).unwrap();
    // The finished frame ends with an empty last block (3 bytes); cutting 6 more tears the
    // block of the last line.
    std::fs::write(&compressed, &bytes[..bytes.len() - 9]).unwrap();
    let read = tool_events(read_log(&compressed).unwrap());
    assert_eq!(read, published[..published.len() - 1]);
}

#[tokio::test]
async fn a_broken_line_inside_the_log_is_an_error_naming_it() {
    let dir = scratch("broken");
    let plain = dir.join("events.jsonl");
    let (_, log) = run_logged(&plain).await;
    log.finish().await.unwrap();
    let text = std::fs::read_to_string(&plain).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"event\":\"call\"}";
    std::fs::write(&plain, lines.join("\n") + "\n").unwrap();
    match read_log(&plain) {
        Err(LogError::Malformed { line, .. }) => assert_eq!(line, 3),
        other => panic!("line 3 is malformed: {other:?}"),
    }
    assert!(matches!(
        read_log(dir.join("absent.jsonl")),
        Err(LogError::Io { .. })
    ));
}

#[tokio::test]
async fn a_lagged_line_reads_as_lost_events() {
    let dir = scratch("lagged");
    let plain = dir.join("events.jsonl");
    std::fs::write(&plain, "{\"event\":\"lagged\",\"missed\":4}\n").unwrap();
    assert_eq!(
        read_log(&plain).unwrap(),
        [LoggedEvent::Lagged { missed: 4 }]
    );
}

/// A call whose arguments and output nest as deep as the pipeline lets through (256 levels,
/// past serde_json's parse limit of 128) is logged and read back whole.
#[tokio::test]
async fn values_as_deep_as_the_pipeline_writes_read_back() {
    let dir = scratch("deep");
    let plain = dir.join("events.jsonl");
    let mut deep = json!(1);
    for _ in 0..254 {
        deep = json!([deep]);
    }
    let arguments = json!({ "v": deep });
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let log = EventLog::start(&registry, &plain).unwrap();
    let result = registry.execute(call("deep", "m", arguments.clone())).await;
    assert!(!result.is_error(), "{result:?}");
    log.finish().await.unwrap();
    let read = tool_events(read_log(&plain).unwrap());
    let output = read.iter().find_map(|event| match event {
        ToolEvent::Result { result, .. } => match &**result {
            dsh_tools::ToolResult::Success { value, .. } => Some(value.clone()),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(output, Some(arguments));

    // Deeper than any event: refused as malformed, with no stack overflow.
    let too_deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(&plain, too_deep).unwrap();
    match read_log(&plain) {
        Err(LogError::Malformed {
            line: 1, message, ..
        }) => {
            assert!(message.contains("nested 100000 levels"), "{message}");
        }
        other => panic!("a too-deep line is malformed: {other:?}"),
    }
}

#[tokio::test]
async fn a_log_past_its_limits_is_a_clear_error() {
    let dir = scratch("limits");
    let plain = dir.join("events.jsonl");
    std::fs::write(&plain, format!("{}\n", " ".repeat(2048))).unwrap();
    match read_log_with(&plain, &ReadLimits::default().with_max_line_bytes(1024)) {
        Err(LogError::LineTooLong {
            line: 1,
            limit: 1024,
            ..
        }) => {}
        other => panic!("a 2 KiB line is past a 1 KiB limit: {other:?}"),
    }
    std::fs::write(&plain, "\n".repeat(4096)).unwrap();
    match read_log_with(&plain, &ReadLimits::default().with_max_log_bytes(1024)) {
        Err(LogError::TooLarge { limit: 1024, .. }) => {}
        other => panic!("a 4 KiB log is past a 1 KiB limit: {other:?}"),
    }
    // Exactly at the limits: read.
    std::fs::write(&plain, format!("{}\n", " ".repeat(1024))).unwrap();
    let limits = ReadLimits::default()
        .with_max_line_bytes(1024)
        .with_max_log_bytes(1025);
    assert_eq!(read_log_with(&plain, &limits).unwrap(), []);
}

/// The log's reader never gets the runtime's only thread while 2,000 calls run on it: a log
/// fed by a broadcast subscriber lost all but the last 1,024 of their events.
#[tokio::test(flavor = "current_thread")]
async fn a_log_loses_no_event_while_the_runtime_is_busy() {
    let dir = std::env::temp_dir().join(format!("dsh-event-log-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("events.jsonl");
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let log = EventLog::start(&registry, &path).unwrap();
    // Blocks this thread, the runtime's only one, until every call has ended.
    futures::executor::block_on(async {
        for n in 0..2_000 {
            registry
                .execute(call(&format!("c{n}"), "m", json!({ "n": n })))
                .await;
        }
    });
    assert_eq!(log.finish().await.unwrap(), 4_000);
    let events = read_log(&path).unwrap();
    assert_eq!(events.len(), 4_000, "no lagged marker, no event lost");
    assert!(matches!(
        &events[3_999],
        LoggedEvent::Tool(ToolEvent::Result { call_id, .. }) if call_id == "c1999"
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
