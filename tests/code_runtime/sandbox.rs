//! The OS sandbox of the subprocess code runtimes and their budgets over the whole process tree, in
//! both languages: what a hostile program can no longer do, and what `Off` still bounds.

use crate::code_runtime_support;

use std::sync::{Arc, Mutex};

use code_runtime_support::*;
use dsh_tools::code::{
    BindingNamespace, Budgets, CodeRuntime, FailureKind, Isolation, RunOutcome, RunRequest,
    Sandbox, SubprocessConfig,
};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

macro_rules! in_both_languages {
    ($($behaviour:ident),* $(,)?) => {$(
        mod $behaviour {
            use super::Lang;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript() {
                super::$behaviour(Lang::TypeScript).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() {
                super::$behaviour(Lang::Python).await;
            }
        }
    )*};
}

in_both_languages!(
    enforce_reports_the_whole_sandbox,
    host_files_and_the_host_environment_are_unreadable,
    another_runs_pipes_are_out_of_reach,
    a_listening_local_socket_cannot_be_reached,
    no_process_can_be_started,
    the_scratch_directory_is_owner_only,
    off_kills_descendants_in_a_new_session,
    off_charges_cpu_of_children,
    off_charges_memory_of_children,
    an_off_heap_bomb_is_a_memory_limit_within_a_quarter_over,
    raised_out_of_memory_errors_are_not_memory_limits,
    a_newline_free_flood_is_an_output_limit,
    a_closed_protocol_descriptor_settles_at_once,
    an_oversized_binding_call_is_rejected,
    max_concurrent_runs_queues_and_queued_runs_cancel,
);

fn sandboxed() -> SubprocessConfig {
    SubprocessConfig {
        sandbox: Sandbox::Enforce,
        ..small()
    }
}

fn off() -> SubprocessConfig {
    SubprocessConfig {
        sandbox: Sandbox::Off,
        ..small()
    }
}

/// Every string in the value's `attempts` that is not `"denied"`, for a helpful failure.
#[track_caller]
fn assert_all_denied(out: &RunOutcome) {
    let value = out
        .value
        .as_ref()
        .map(|v| v.to_value())
        .unwrap_or_else(|| panic!("{out:?}"));
    let attempts = value.as_object().expect("an object of attempts");
    assert!(!attempts.is_empty());
    for (what, result) in attempts {
        assert_eq!(result, "denied", "{what} was allowed: {out:?}");
    }
}

async fn enforce_reports_the_whole_sandbox(lang: Lang) {
    let rt = lang.runtime(sandboxed()).await;
    assert_eq!(rt.isolation(), Isolation::SandboxedProcess);
    let status = rt.sandbox().clone();
    assert!(status.missing.is_empty(), "{status:?}");
    assert!(status.filesystem && status.network && status.scopes && status.processes);
    let out = run(&rt, "return 1").await;
    assert_value(&out, json!(1));
    assert_eq!(out.sandbox.as_ref(), Some(&status));
    rt.dispose().await;
    let rt = lang.runtime(off()).await;
    assert_eq!(rt.isolation(), Isolation::Process);
    assert!(!rt.sandbox().is_active());
    rt.dispose().await;
}

async fn host_files_and_the_host_environment_are_unreadable(lang: Lang) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "sandbox-secret-{}-{}",
        lang.name(),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "host secret").unwrap();
    let secret = secret.display().to_string();
    let program = lang.pick(
        format!(
            r#"const fs = await import('node:fs');
const attempts = {{}};
for (const path of [{secret:?}, '/etc/passwd', `/proc/${{process.ppid}}/environ`, '/proc/1/cmdline', '/proc/self/environ', '/tmp']) {{
  try {{ fs.readFileSync(path); attempts[path] = 'read'; }} catch (e) {{
    try {{ fs.readdirSync(path); attempts[path] = 'listed'; }} catch {{ attempts[path] = 'denied'; }}
  }}
}}
try {{ fs.writeFileSync({secret:?}, 'forged'); attempts.write = 'written'; }} catch {{ attempts.write = 'denied'; }}
return attempts;"#
        ),
        format!(
            r#"import os
attempts = {{}}
for path in [{secret:?}, '/etc/passwd', f'/proc/{{os.getppid()}}/environ', '/proc/1/cmdline', '/proc/self/environ', '/tmp']:
    try:
        open(path, 'rb').read()
        attempts[path] = 'read'
    except OSError:
        try:
            os.listdir(path)
            attempts[path] = 'listed'
        except OSError:
            attempts[path] = 'denied'
try:
    open({secret:?}, 'w').write('forged')
    attempts['write'] = 'written'
except OSError:
    attempts['write'] = 'denied'
return attempts"#
        ),
    );
    let out = lang.run_once(sandboxed(), &program, &program).await;
    assert_all_denied(&out);
    assert_eq!(
        std::fs::read_to_string(dir.join("secret.txt")).unwrap(),
        "host secret"
    );
    // The same program under Off reads the host file: the test can tell.
    let out = lang.run_once(off(), &program, &program).await;
    let value = out
        .value
        .map(|v| v.to_value())
        .unwrap_or_else(|| panic!("{:?}", out.error));
    assert_eq!(value[&secret], "read");
}

/// A run that reports its pid through `tools.report` and then waits for `tools.gate`, whose
/// result it returns.
fn victim(lang: Lang) -> &'static str {
    lang.pick(
        "await tools.report(process.pid);\nreturn await tools.gate({});",
        "import os\nawait tools.report(os.getpid())\nreturn await tools.gate({})",
    )
}

struct Gate {
    pids: Arc<Mutex<Vec<u64>>>,
    reported: Arc<Notify>,
    open: Arc<Notify>,
}

impl Gate {
    fn new() -> Self {
        Gate {
            pids: Arc::default(),
            reported: Arc::default(),
            open: Arc::default(),
        }
    }

    fn request(&self, program: &str) -> RunRequest {
        let (pids, reported, open) = (self.pids.clone(), self.reported.clone(), self.open.clone());
        RunRequest::new(program)
            .binding(BindingNamespace::tools(["report", "gate"]))
            .dispatch(dispatch(move |call| {
                let (pids, reported, open) = (pids.clone(), reported.clone(), open.clone());
                async move {
                    if call.name == "report" {
                        pids.lock().unwrap().push(call.args.as_u64().unwrap_or(0));
                        reported.notify_one();
                        Ok(json!(null))
                    } else {
                        open.notified().await;
                        Ok(json!("the victim's own result"))
                    }
                }
            }))
    }
}

async fn another_runs_pipes_are_out_of_reach(lang: Lang) {
    let rt = Arc::new(lang.runtime(sandboxed()).await);
    let gate = Gate::new();
    let victim_run = {
        let (rt, request) = (rt.clone(), gate.request(victim(lang)));
        tokio::spawn(async move { rt.run(request).await.unwrap() })
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), gate.reported.notified())
        .await
        .expect("the victim reported its pid");
    let pid = gate.pids.lock().unwrap()[0];
    let forged = r#"{"type":"done","value":"forged"}\n"#;
    let attacker = lang.pick(
        format!(
            r#"const fs = await import('node:fs');
const attempts = {{}};
for (const fd of [3, 4]) {{
  try {{ fs.writeFileSync(`/proc/{pid}/fd/${{fd}}`, '{forged}'); attempts['write ' + fd] = 'written'; }} catch {{ attempts['write ' + fd] = 'denied'; }}
}}
try {{ fs.readdirSync('/proc/{pid}/fd'); attempts.list = 'listed'; }} catch {{ attempts.list = 'denied'; }}
try {{ fs.readFileSync('/proc/{pid}/environ'); attempts.environ = 'read'; }} catch {{ attempts.environ = 'denied'; }}
try {{ process.kill({pid}, 'SIGKILL'); attempts.kill = 'killed'; }} catch {{ attempts.kill = 'denied'; }}
return attempts;"#
        ),
        format!(
            r#"import os, signal
attempts = {{}}
for fd in (3, 4):
    try:
        with open(f'/proc/{pid}/fd/{{fd}}', 'w') as f:
            f.write('{forged}')
        attempts[f'write {{fd}}'] = 'written'
    except OSError:
        attempts[f'write {{fd}}'] = 'denied'
try:
    os.listdir('/proc/{pid}/fd')
    attempts['list'] = 'listed'
except OSError:
    attempts['list'] = 'denied'
try:
    open('/proc/{pid}/environ', 'rb').read()
    attempts['environ'] = 'read'
except OSError:
    attempts['environ'] = 'denied'
try:
    os.kill({pid}, signal.SIGKILL)
    attempts['kill'] = 'killed'
except OSError:
    attempts['kill'] = 'denied'
return attempts"#
        ),
    );
    assert_all_denied(&run(rt.as_ref(), &attacker).await);
    gate.open.notify_one();
    let victim_out = victim_run.await.unwrap();
    assert_value(&victim_out, json!("the victim's own result"));
    // A later run is untouched too.
    assert_value(&run(rt.as_ref(), "return 'later'").await, json!("later"));
    rt.dispose().await;
}

async fn a_listening_local_socket_cannot_be_reached(lang: Lang) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let program = lang.pick(
        format!(
            r#"const net = await import('node:net');
const attempts = {{}};
attempts.tcp = await new Promise((resolve) => {{
  try {{
    const s = net.connect({port}, '127.0.0.1');
    s.on('connect', () => {{ s.destroy(); resolve('connected'); }});
    s.on('error', () => resolve('denied'));
  }} catch {{ resolve('denied'); }}
}});
const dgram = await import('node:dgram');
attempts.udp = await new Promise((resolve) => {{
  try {{
    const u = dgram.createSocket('udp4');
    u.on('error', () => resolve('denied'));
    u.send('x', {port}, '127.0.0.1', (e) => resolve(e ? 'denied' : 'sent'));
  }} catch {{ resolve('denied'); }}
}});
return attempts;"#
        ),
        format!(
            r#"import socket
attempts = {{}}
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()
    attempts['tcp'] = 'connected'
except OSError:
    attempts['tcp'] = 'denied'
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))
    attempts['udp'] = 'sent'
except OSError:
    attempts['udp'] = 'denied'
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('\0dsh-abstract')
    attempts['unix'] = 'connected'
except OSError:
    attempts['unix'] = 'denied'
return attempts"#
        ),
    );
    let out = lang.run_once(sandboxed(), &program, &program).await;
    assert_all_denied(&out);
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    // Under Off the same program connects: the test can tell.
    let out = lang.run_once(off(), &program, &program).await;
    assert_eq!(
        out.value.as_ref().map(|v| v.to_value()["tcp"].clone()),
        Some(json!("connected")),
        "{out:?}"
    );
}

async fn no_process_can_be_started(lang: Lang) {
    let program = lang.pick(
        r#"const cp = await import('node:child_process');
const attempts = {};
for (const [what, f] of [
  ['spawnSync true', () => cp.spawnSync('/bin/true').error],
  ['spawnSync node', () => cp.spawnSync(process.execPath, ['-e', '0']).error],
  ['execSync', () => { cp.execSync('echo hi'); }],
]) {
  try { attempts[what] = f() ? 'denied' : 'started'; } catch { attempts[what] = 'denied'; }
}
attempts.spawn = await new Promise((resolve) => {
  try {
    const c = cp.spawn('/bin/true');
    c.on('error', () => resolve('denied'));
    c.on('spawn', () => resolve('started'));
  } catch { resolve('denied'); }
});
return attempts;"#,
        r#"import os, subprocess, sys
attempts = {}
for what, f in [
    ('fork', os.fork),
    ('subprocess true', lambda: subprocess.run(['/bin/true'])),
    ('subprocess python', lambda: subprocess.run([sys.executable, '-c', '0'])),
    ('posix_spawn', lambda: os.posix_spawn('/bin/true', ['true'], {})),
    ('exec sh', lambda: os.execv('/bin/sh', ['sh', '-c', 'exit 0'])),
]:
    try:
        pid = f()
        if pid == 0:
            os._exit(0)
        attempts[what] = 'started'
    except OSError:
        attempts[what] = 'denied'
return attempts"#,
    );
    let out = lang.run_once(sandboxed(), program, program).await;
    assert_all_denied(&out);
}

async fn the_scratch_directory_is_owner_only(lang: Lang) {
    let out = lang
        .run_once(
            sandboxed(),
            "const fs = await import('node:fs');\nfs.writeFileSync('own.txt', 'mine');\nreturn [fs.statSync('.').mode & 0o777, fs.statSync('worker.mjs').mode & 0o777, fs.readFileSync('own.txt', 'utf8')];",
            "import os\nopen('own.txt', 'w').write('mine')\nreturn [os.stat('.').st_mode & 0o777, os.stat('worker.py').st_mode & 0o777, open('own.txt').read()]",
        )
        .await;
    assert_value(&out, json!([0o700, 0o600, "mine"]));
}

async fn off_kills_descendants_in_a_new_session(lang: Lang) {
    // A shell puts `sleep` in a new session and exits: the sleeper is orphaned, in neither the
    // run's process group nor its session.
    let daemon = "setsid /bin/sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > sleeper.pid";
    let out = lang
        .run_once(
            off(),
            &format!(
                "const cp = await import('node:child_process');\nconst fs = await import('node:fs');\ncp.execFileSync('/bin/sh', ['-c', '{daemon}']);\nreturn Number(fs.readFileSync('sleeper.pid', 'utf8'));"
            ),
            &format!(
                "import subprocess\nsubprocess.run(['/bin/sh', '-c', '{daemon}'], check=True)\nreturn int(open('sleeper.pid').read())"
            ),
        )
        .await;
    let pid = out
        .value
        .as_ref()
        .and_then(|v| v.to_value().as_u64())
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(eventually_gone(pid).await, "sleeper {pid} survived the run");
}

async fn off_charges_cpu_of_children(lang: Lang) {
    // The program itself idles; two children burn CPU. Only counting them ends the run before
    // the wall-clock ceiling.
    let burn = "while :; do :; done";
    let out = lang
        .run_once(
            off(),
            &format!(
                "const cp = await import('node:child_process');\nfor (let i = 0; i < 2; i++) cp.spawn('/bin/sh', ['-c', '{burn}'], {{ stdio: 'ignore' }});\nawait new Promise((r) => setTimeout(r, 3_600_000));"
            ),
            &format!(
                "import subprocess, asyncio\nfor _ in range(2):\n    subprocess.Popen(['/bin/sh', '-c', '{burn}'])\nawait asyncio.sleep(3600)"
            ),
        )
        .await;
    assert_failure(&out, FailureKind::Timeout, "compute budget exhausted");
}

async fn off_charges_memory_of_children(lang: Lang) {
    // Three children of 60 MiB each, none over the 128 MiB budget alone.
    let out = lang
        .run_once(
            off(),
            "const cp = await import('node:child_process');\nfor (let i = 0; i < 3; i++) cp.spawn(process.execPath, ['-e', 'globalThis.b = Buffer.alloc(60 << 20, 1); setInterval(() => {}, 1000)'], { stdio: 'ignore' });\nawait new Promise((r) => setTimeout(r, 3_600_000));",
            "import subprocess, sys, asyncio\nfor _ in range(3):\n    subprocess.Popen([sys.executable, '-c', 'import time\\nb = b\"\\\\x01\" * (60 << 20)\\ntime.sleep(1000)'])\nawait asyncio.sleep(3600)",
        )
        .await;
    assert_failure(&out, FailureKind::MemoryLimit, "memory budget exhausted");
}

/// The peak resident size the host reported, in MiB.
fn reported_peak(out: &RunOutcome) -> u64 {
    let message = &out.error.as_ref().expect("a failure").message;
    let peak = message.split("peak ").nth(1).expect("a peak");
    peak.split(' ').next().unwrap().parse().unwrap()
}

async fn an_off_heap_bomb_is_a_memory_limit_within_a_quarter_over(lang: Lang) {
    for config in [sandboxed(), off()] {
        let config = SubprocessConfig {
            budgets: Budgets {
                max_memory_mb: 256,
                compute_ms: 30_000,
                ..Budgets::default()
            },
            ..config
        };
        let out = lang
            .run_once(
                config,
                "const hoard = [];\nwhile (true) hoard.push(Buffer.alloc(4 << 20, 1));",
                "hoard = []\nwhile True:\n    hoard.append(b'\\x01' * (4 << 20))",
            )
            .await;
        assert_failure(&out, FailureKind::MemoryLimit, "memory budget exhausted");
        let peak = reported_peak(&out);
        assert!(peak <= 320, "peak {peak} MiB over 1.25 × 256 MiB: {out:?}");
    }
}

async fn raised_out_of_memory_errors_are_not_memory_limits(lang: Lang) {
    let rt = lang.runtime(sandboxed()).await;
    let raised = run(
        &rt,
        lang.pick(
            "throw new RangeError('Array buffer allocation failed');",
            "raise MemoryError('out of memory')",
        ),
    )
    .await;
    assert_failure(
        &raised,
        FailureKind::Exception,
        lang.pick(
            "RangeError: Array buffer allocation failed",
            "MemoryError: out of memory",
        ),
    );
    let aborted = run(&rt, lang.pick("process.abort();", "import os\nos.abort()")).await;
    assert_failure(&aborted, FailureKind::WorkerExit, "SIGABRT");
    rt.dispose().await;
}

async fn a_newline_free_flood_is_an_output_limit(lang: Lang) {
    let config = SubprocessConfig {
        budgets: Budgets {
            max_output_bytes: 4096,
            ..Budgets::default()
        },
        ..sandboxed()
    };
    let out = lang
        .run_once(
            config,
            "while (true) process.stdout.write('x');",
            "import sys\nwhile True:\n    print('x', end='')\n    sys.stdout.write('y')",
        )
        .await;
    // The output is kept up to the cap (the diagnostic gets what is left of it).
    assert_failure(&out, FailureKind::OutputLimit, "");
    let kept: usize = out.logs.iter().map(|l| l.len() + 3).sum();
    assert!(
        kept > 3000,
        "only {kept} bytes of output kept: {:?}",
        out.logs
    );
}

async fn a_closed_protocol_descriptor_settles_at_once(lang: Lang) {
    // The wall-clock ceiling is far away: only noticing the closed channel ends the run.
    let config = SubprocessConfig {
        budgets: Budgets {
            max_wall_ms: 600_000,
            ..Budgets::default()
        },
        ..sandboxed()
    };
    let rt = lang.runtime(config).await;
    let out = well_before_the_ceiling(run(
        &rt,
        lang.pick(
            "const fs = await import('node:fs');\nfs.closeSync(3);\nawait new Promise((r) => setTimeout(r, 3_600_000));",
            "import os, asyncio\nos.close(3)\nawait asyncio.sleep(3600)",
        ),
    ))
    .await;
    assert_failure(&out, FailureKind::WorkerExit, "closed its protocol channel");
    rt.dispose().await;
}

async fn an_oversized_binding_call_is_rejected(lang: Lang) {
    let tools = Tools::new();
    let rt = lang.runtime(sandboxed()).await;
    // Through the bindings: refused in the child, the call never crosses.
    let out = tools
        .run(
            &rt,
            lang.pick(
                "try { await tools.echo('x'.repeat(1100000)); } catch (e) { return e.message; }",
                "try:\n    await tools.echo('x' * 1100000)\nexcept Exception as e:\n    return str(e)",
            ),
        )
        .await;
    assert_value(&out, json!("binding arguments exceed 1048576 bytes"));
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    rt.dispose().await;
}

async fn max_concurrent_runs_queues_and_queued_runs_cancel(lang: Lang) {
    let config = SubprocessConfig {
        budgets: Budgets {
            max_concurrent_runs: 1,
            ..Budgets::default()
        },
        standby: false,
        ..sandboxed()
    };
    let rt = Arc::new(lang.runtime(config).await);
    let gate = Gate::new();
    let first = {
        let (rt, request) = (rt.clone(), gate.request(victim(lang)));
        tokio::spawn(async move { rt.run(request).await.unwrap() })
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), gate.reported.notified())
        .await
        .expect("the first run started");
    // The only slot is taken: the second run's first step is to wait for it (nothing else
    // comes before, so one poll shows it), and cancelling it ends it in the queue.
    let signal = CancellationToken::new();
    let mut second = rt.run(RunRequest::new("return 'ran'").signal(signal.clone()));
    assert!(futures::poll!(&mut second).is_pending());
    signal.cancel();
    assert_failure(
        &second.await.unwrap(),
        FailureKind::Abort,
        "run aborted while queued",
    );
    gate.open.notify_one();
    assert_value(&first.await.unwrap(), json!("the victim's own result"));
    // The slot is free again.
    assert_value(&run(rt.as_ref(), "return 'ran'").await, json!("ran"));
    rt.dispose().await;
}
