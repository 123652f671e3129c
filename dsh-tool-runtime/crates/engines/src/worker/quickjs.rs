//! QuickJS inside the worker process ([`EmbeddedRuntime::javascript`]): the same engine as in
//! the host (`crate::quickjs`), one fresh interpreter per run, speaking the frame protocol of the
//! Monty worker over the same shared rings. QuickJS does not poll its interrupt hook inside
//! long built-ins (a `replaceAll` over a huge string, a sort of millions of elements), so no
//! budget can be kept from inside the interpreter: here the host keeps them all, watching the
//! worker as it watches Monty's and killing it when a budget or a cancellation is due.
//!
//! This side only runs the program. Its own budgets are set out of reach so that the host
//! decides every limit kind; the one thing this process decides is the heap limit of the
//! worker's allocator (exit status [`monty_types::OOM_EXIT_CODE`]). A run that ends any other
//! way than with a value or a program error ends the process, leaving the host to report why.
//!
//! [`EmbeddedRuntime::javascript`]: crate::EmbeddedRuntime::javascript

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use dsh_tool_code_mode::__engines::parse_unbounded;
use dsh_tool_code_mode::code_runtime::frame;
use dsh_tool_code_mode::code_runtime::{
    BindingCall, BindingError, BindingNamespace, Budgets, ErrorClass, FailureKind, RunRequest,
};
use dsh_tool_runtime::json::text_depth;

use super::alloc::release_memory;
use super::channel::Channel;
use crate::config::EmbeddedConfig;
use crate::driver::{Ending, Job, Relay};
use crate::monty::interpreter::{Halt, Link};

/// The worker argument that selects QuickJS.
pub(crate) const ENGINE_ARG: &str = "quickjs";

/// Exit status of a run that ended in a way only the host may report (an output overflow the
/// host has counted too, an interpreter that could not start).
const HOST_DECIDES: i32 = 75;

/// A budget no run reaches: the host keeps the real one.
const UNREACHED_MS: u64 = i32::MAX as u64;

/// The channel and the calls waiting for their replies, shared by the dispatcher and the relay
/// (both on the interpreter thread).
struct Shared {
    channel: Channel,
    waiting: HashMap<u64, oneshot::Sender<Result<Value, BindingError>>>,
    /// Call ids count up over the worker's life, so a late reply to an earlier run's call
    /// finds nothing waiting.
    last_id: u64,
}

type Host = Arc<Mutex<Shared>>;

/// The host is gone: nothing is left to serve.
fn host_gone() -> ! {
    std::process::exit(0)
}

struct HostRelay(Host);

impl Relay for HostRelay {
    fn log(&mut self, text: &str) {
        let mut shared = self.0.lock();
        // Flushed at once: a log must reach the host even if the run is killed next.
        if shared
            .channel
            .log(text)
            .and_then(|()| shared.channel.flush())
            .is_err()
        {
            host_gone();
        }
    }

    fn wait(&mut self) {
        let mut guard = self.0.lock();
        let Shared {
            channel, waiting, ..
        } = &mut *guard;
        if channel.flush().is_err() {
            host_gone();
        }
        let read = channel.lines(|line| {
            if let Some((id, reply)) = decode_reply(line)
                && let Some(tx) = waiting.remove(&id)
            {
                let _ = tx.send(reply);
            }
        });
        if read.is_err() {
            host_gone();
        }
    }
}

/// A reply frame: its id and result. Deep values are read on a stack sized for them.
fn decode_reply(line: &[u8]) -> Option<(u64, Result<Value, BindingError>)> {
    let depth = text_depth(line);
    frame::with_stack_for(depth, || {
        let mut frame = parse_unbounded(line)?;
        let id = frame.get("id")?.as_u64()?;
        let reply = if frame.get("ok")?.as_bool()? {
            Ok(frame
                .get_mut("value")
                .map(Value::take)
                .unwrap_or(Value::Null))
        } else {
            let message = frame.get("message")?.as_str()?.to_owned();
            let code = frame.get("code").and_then(Value::as_str).map(str::to_owned);
            Err(BindingError { message, code })
        };
        Some((id, reply))
    })
}

/// The namespaces of a run frame (their bootstrap form) as the request carries them.
fn namespaces(run: &Value) -> Vec<BindingNamespace> {
    let Some(list) = run["namespaces"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|ns| {
            let names = ns["names"].as_array()?;
            Some(BindingNamespace {
                global: ns["global"].as_str()?.to_owned(),
                names: names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                error_class: ns["errorClass"].as_object().and_then(|class| {
                    Some(ErrorClass {
                        name: class.get("name")?.as_str()?.to_owned(),
                        member_name_property: class.get("member")?.as_str()?.to_owned(),
                    })
                }),
            })
        })
        .collect()
}

/// Serves run frames until the host closes its end; the process's exit status.
pub(crate) fn serve(channel: Channel) -> i32 {
    let Ok(tokio) = tokio::runtime::Builder::new_current_thread().build() else {
        return 71;
    };
    crate::quickjs::prepare();
    let shared: Host = Arc::new(Mutex::new(Shared {
        channel,
        waiting: HashMap::new(),
        last_id: 0,
    }));
    loop {
        let run = match shared.lock().channel.next_run() {
            Ok(run) => run,
            Err(code) => return code,
        };
        let cap = run["maxOutputBytes"].as_u64().unwrap_or(64 << 20);
        let link = Arc::clone(&shared);
        let dispatch = Arc::new(move |call: BindingCall| {
            let (tx, rx) = oneshot::channel();
            let mut shared = link.lock();
            shared.last_id += 1;
            let id = shared.last_id;
            let args = frame::with_stack_for(frame::inspect(&call.args).unwrap_or(0), || {
                serde_json::to_string(&call.args)
            });
            let sent = args.map(|args| shared.channel.call(id, &call.namespace, &call.name, &args));
            match sent {
                Ok(Ok(Ok(()))) => {
                    shared.waiting.insert(id, tx);
                }
                Ok(Err(Halt)) => host_gone(),
                Ok(Ok(Err(message))) => drop(tx.send(Err(BindingError::new(message)))),
                Err(e) => drop(tx.send(Err(BindingError::new(e.to_string())))),
            }
            async move {
                rx.await
                    .unwrap_or_else(|_| Err(BindingError::new("run_code run is over")))
            }
            .boxed()
        });
        let job = Job {
            program: run["program"].as_str().unwrap_or_default().to_owned(),
            request: namespaces(&run)
                .into_iter()
                .fold(RunRequest::new(String::new()), RunRequest::binding)
                .dispatch(dispatch),
            config: EmbeddedConfig {
                budgets: Budgets {
                    compute_ms: UNREACHED_MS,
                    max_wall_ms: UNREACHED_MS,
                    max_memory_mb: 1 << 20,
                    max_output_bytes: cap,
                    max_binding_calls: u64::MAX,
                    ..Budgets::default()
                },
                // The worker's allocator holds the heap to the budget: the interpreter's own
                // limit stays above it.
                ..EmbeddedConfig::default()
            },
            disposed: CancellationToken::new(),
            handle: tokio.handle().clone(),
            lane: None,
            relay: Some(Box::new(HostRelay(Arc::clone(&shared)))),
        };
        drop(run);
        let mut done = None;
        crate::quickjs::execute(job, |ending, _, _| done = Some(done_frame(ending)));
        shared.lock().waiting.clear();
        let Some(Some(done)) = done else {
            return HOST_DECIDES;
        };
        if shared.lock().channel.done(&done).is_err() {
            return 0;
        }
        release_memory();
    }
}

/// The `done` frame of an ending this side may report, `None` for one the host decides. A
/// refused allocation ends the process at once, as the worker's allocator does.
fn done_frame(ending: Ending) -> Option<String> {
    let frame = match ending {
        Ending::Done(None) => serde_json::json!({"type": "done"}),
        Ending::Done(Some(value)) => {
            return Some(format!(r#"{{"type":"done","value":{value}}}"#));
        }
        Ending::Fail(FailureKind::MemoryLimit, _) => {
            // SAFETY: `_exit` ends the process at once; nothing runs after it.
            #[allow(unsafe_code)]
            unsafe {
                libc::_exit(monty_types::OOM_EXIT_CODE)
            }
        }
        Ending::Fail(kind @ (FailureKind::Exception | FailureKind::InvalidOutput), message) => {
            serde_json::json!({"type": "done", "error": {"kind": kind, "message": message}})
        }
        Ending::Fail(..) | Ending::Overflow(_) => return None,
    };
    Some(frame.to_string())
}
