//! The worker process: its entry point ([`worker_main`]) and the loop that serves run frames one
//! after another, each in a fresh Monty interpreter, or in QuickJS when started with `quickjs`
//! (`quickjs.rs`), over the same channel to the host (`channel.rs`); the heap's allocator
//! (`alloc.rs`) is the one thing that outlives a run.

mod alloc;
mod channel;
pub(crate) mod quickjs;

use std::sync::atomic::Ordering;

pub use alloc::WorkerAllocator;
use alloc::{LIMIT, release_memory};
use channel::{Channel, open_channel};

use crate::monty::interpreter::{Finish, execute};

/// Stack of the interpreter thread: Monty's recursion limit (1,000 frames) and the conversion
/// of values up to [`MAX_DEPTH`](dsh_tool_code_mode::code_runtime::frame::MAX_DEPTH) levels fit
/// well inside it.
const STACK_BYTES: usize = 64 << 20;

/// The worker's entry point: `<worker> <max-memory-bytes> [quickjs] <bootstrap>`. Serves run
/// frames one after another, each in a fresh interpreter (Monty, or QuickJS with `quickjs`),
/// until the host closes its end. Never returns.
#[doc(hidden)]
pub fn worker_main() -> ! {
    let limit = std::env::args()
        .nth(1)
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(512 << 20);
    // The worker's own start-up is charged as well: the budget covers the whole heap.
    LIMIT.store(limit, Ordering::Relaxed);
    let quickjs = std::env::args().nth(2).as_deref() == Some(quickjs::ENGINE_ARG);
    let code = std::thread::Builder::new()
        .name("dsh-monty".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let channel = match open_channel() {
                Ok(channel) => channel,
                Err(code) => return code,
            };
            if quickjs {
                quickjs::serve(channel)
            } else {
                serve(channel)
            }
        })
        .ok()
        .and_then(|t| t.join().ok())
        .unwrap_or(70);
    std::process::exit(code)
}

/// Serves Monty runs until the host closes its end; the process's exit status.
fn serve(mut channel: Channel) -> i32 {
    loop {
        let run = match channel.next_run() {
            Ok(run) => run,
            Err(code) => return code,
        };
        let done = execute(&run, &mut channel);
        drop(run);
        if let Finish::Done(done) = done {
            if channel.done(&done).is_err() {
                return 0;
            }
        } else {
            return 0;
        }
        release_memory();
    }
}
