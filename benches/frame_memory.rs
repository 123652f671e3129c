//! Host memory per binding-call frame at the frame cap (`max_frame_bytes`, 1 MiB by default), as
//! a multiple of the frame's bytes (SPEC §8.1: ≤ ~4×).
//!
//! Run: `cargo bench --features code-mode --bench frame_memory`. A TypeScript program sends one
//! call frame 256 bytes short of the cap, `["sss…", 0, 0, …]`, its share of dense numbers swept
//! from none (a string costs its bytes once decoded) to all (tens of times their bytes, refused);
//! each frame is measured in a fresh process of this binary, after a warm run, as the rise of its
//! resident high-water mark (`VmHWM`, reset first) over its resident size, and the table lists
//! each and the worst.

use std::time::Duration;

use dsh_tools::code::{
    BindingNamespace, Budgets, CodeRuntime, RunRequest, SubprocessConfig, SubprocessRuntime,
};
use futures::FutureExt;

/// Set in the child process measuring one frame: its share of dense numbers, per mille.
const SHARE: &str = "DSH_FRAME_MEMORY_SHARE";

const FRAME_CAP: u64 = 1 << 20;

const SHARES: [u64; 15] = [0, 2, 4, 6, 8, 10, 12, 16, 24, 32, 64, 125, 250, 500, 1000];

/// A field of `/proc/self/status` in bytes.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .expect("a status field")
        * 1024
}

fn program(per_mille: u64) -> String {
    let body = FRAME_CAP - 256;
    let zeros = (body - 64) * per_mille / 1000 / 2;
    let string = body - 64 - 2 * zeros;
    format!(
        "const a = new Array({zeros} + 1).fill(0);\na[0] = 's'.repeat({string});\n\
         try {{ await tools.report(a); return 'admitted'; }} catch {{ return 'refused'; }}"
    )
}

/// In the child: one warm run, then the frame; prints `<admitted> <bytes grown>`.
fn measure(per_mille: u64) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    tokio.block_on(async {
        let config = SubprocessConfig {
            budgets: Budgets {
                max_wall_ms: 60_000,
                ..Budgets::default()
            },
            ..SubprocessConfig::default()
        };
        let rt = SubprocessRuntime::typescript(config)
            .await
            .expect("node on PATH");
        let run = |program: String| {
            RunRequest::new(program)
                .binding(BindingNamespace::tools(["report"]))
                .dispatch(std::sync::Arc::new(|_| {
                    async { Ok(serde_json::Value::Null) }.boxed()
                }))
        };
        let warm = rt.run(run("return 1".to_owned())).await.expect("a run");
        assert_eq!(warm.error, None);
        // The high-water mark restarts from the resident size now (Linux `clear_refs` 5).
        std::fs::write("/proc/self/clear_refs", "5").expect("the high-water mark resets");
        let before = status_bytes("VmRSS");
        let out = rt.run(run(program(per_mille))).await.expect("a run");
        let grown = status_bytes("VmHWM").saturating_sub(before);
        assert_eq!(out.error, None, "{out:?}");
        let admitted = serde_json::to_value(&out.value).ok() == Some(serde_json::json!("admitted"));
        println!("{admitted} {grown}");
        tokio::time::timeout(Duration::from_secs(10), rt.dispose())
            .await
            .expect("disposed");
    });
}

fn main() {
    if let Ok(share) = std::env::var(SHARE) {
        measure(share.parse().expect("a share"));
        return;
    }
    println!("host memory per binding-call frame at the 1 MiB frame cap (TypeScript child)");
    println!(
        "{:>10} {:>9} {:>10} {:>8}",
        "dense ‰", "admitted", "grown KiB", "× frame"
    );
    let mut worst = 0.0f64;
    for per_mille in SHARES {
        let out = std::process::Command::new(std::env::current_exe().expect("this binary"))
            .env(SHARE, per_mille.to_string())
            .output()
            .expect("this binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{per_mille}‰: {stdout}");
        let (admitted, grown) = stdout
            .lines()
            .last()
            .and_then(|l| l.split_once(' '))
            .expect("a measurement");
        let grown: u64 = grown.parse().expect("bytes");
        let ratio = grown as f64 / FRAME_CAP as f64;
        worst = worst.max(ratio);
        println!(
            "{per_mille:>10} {admitted:>9} {:>10} {ratio:>7.2}×",
            grown >> 10
        );
    }
    println!("worst: {worst:.2}× the frame's bytes");
}
