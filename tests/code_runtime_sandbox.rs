//! The OS sandbox of the subprocess code runtimes (SPEC §8.1).

mod code_runtime_support;

use code_runtime_support::*;
use dsh_tools::code_runtime::{CodeRuntime, Sandbox, SubprocessConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    for lang in [Lang::TypeScript, Lang::Python] {
        let rt = lang.runtime(SubprocessConfig { sandbox: Sandbox::Enforce, ..small() }).await;
        eprintln!("{:?}", rt.sandbox());
        let out = run(&rt, lang.pick("console.log('hi'); return 1 + 1", "print('hi')\nreturn 1 + 1")).await;
        eprintln!("{out:?}");
        rt.dispose().await;
    }
}
