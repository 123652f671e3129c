//! Host memory per protocol frame: a hostile child writing a 4 MB binding-call frame straight onto
//! the protocol pipe costs the host less than 16 MB. One test in its own binary, so the process's
//! resident high-water mark is this test's alone.

mod code_runtime_support;

use code_runtime_support::*;
use dsh_tools::code::{CodeRuntime, SubprocessConfig};

/// The host process's resident high-water mark, bytes.
fn host_peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_mb_argument_frame_costs_the_host_less_than_16_mb() {
    // 4 MiB of `0,`: the densest JSON array, ~36 times its size as a decoded value.
    let typescript = r#"const fs = await import('node:fs');
const bytes = Buffer.from('{"type":"call","id":1,"global":"tools","name":"echo","args":[' + '0,'.repeat(2 << 20) + '0]}\n');
let offset = 0;
while (offset < bytes.length) offset += fs.writeSync(3, bytes, offset, bytes.length - offset);
return 'sent';"#;
    let python = r#"import os
data = memoryview(('{"type":"call","id":1,"global":"tools","name":"echo","args":[' + '0,' * (2 << 20) + '0]}\n').encode())
while data:
    data = data[os.write(3, data):]
return 'sent'"#;
    let tools = Tools::new();
    for lang in [Lang::TypeScript, Lang::Python] {
        // The default frame limit (1 MiB) and one that lets the frame be buffered whole.
        for max_frame_bytes in [SubprocessConfig::default().max_frame_bytes, 8 << 20] {
            let config = SubprocessConfig {
                max_frame_bytes,
                ..small()
            };
            let rt = lang.runtime(config).await;
            assert_value(
                &tools.run(&rt, "return 'warm'").await,
                serde_json::json!("warm"),
            );
            let before = host_peak_rss();
            let out = tools.run(&rt, lang.pick(typescript, python)).await;
            assert_value(&out, serde_json::json!("sent"));
            let grown = host_peak_rss().saturating_sub(before);
            assert!(
                grown < 16 << 20,
                "{lang:?}, max_frame_bytes {max_frame_bytes}: the host grew by {grown} bytes"
            );
            rt.dispose().await;
        }
    }
    // The call was refused, never dispatched.
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}
