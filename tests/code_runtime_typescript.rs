//! The TypeScript subprocess runtime end to end (SPEC §8), against the `node` on PATH.

use dsh_tools::code_runtime::{CodeRuntime, RunRequest, SubprocessConfig, SubprocessRuntime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    let rt = SubprocessRuntime::typescript(SubprocessConfig::default())
        .await
        .unwrap();
    let out = rt
        .run(RunRequest::new(
            "const x: number = 1;\nconsole.log('hi', {a: 1});\nreturn x + 1;",
        ))
        .await
        .unwrap();
    println!("{out:?}");
    let out = rt
        .run(RunRequest::new("throw new Error('boom')"))
        .await
        .unwrap();
    println!("{out:?}");
    rt.dispose().await;
}
