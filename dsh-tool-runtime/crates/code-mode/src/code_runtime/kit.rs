//! What the embedded engines (`dsh-tool-engines`) share with the subprocess runtimes: the run
//! session's binding calls, endings and output ledger, the frame protocol's value texts, the
//! admission of a run, and a worker process with its sandbox and watch. Not a public API: it
//! changes with the engines, released together with this crate.

pub use super::admission::admit;
pub use super::ending::{Ending, early_outcome};
pub use super::ledger::{Lines, json_str_len, longest_prefix};
pub use super::sandbox::Plan;
pub use super::value_text::{Refused, Unfit, canonical, parse_unbounded};
pub use super::{Lane, javascript_bootstrap};

use super::{BindingNamespace, RunRequest};

/// The binding calls of one run and the frames that carry them.
pub mod calls {
    pub use super::super::calls::{
        Admitted, Calls, CheckedResolution, Step, Target, reply_frame, run_frame,
    };
}

/// Type stripping and the program size limit.
pub mod strip {
    pub use super::super::strip::{oversized, strip_types};
}

/// A child process on the frame protocol: how it is started and its resource usage.
pub mod process {
    pub use super::super::process::{Launch, MemoryLimit, Worker, cpu_time_ms};
}

/// The watch over a child's run: abort, wall clock, CPU and memory.
pub mod watch {
    pub use super::super::watch::{
        DRAIN_GRACE, FRAME_SLACK, Watch, closed_before_completing, exit_after_close,
    };
}

/// Takes the scheduler lane `run_code` offers with `request`, for a runtime that polls the
/// run's binding calls on a thread of its own.
pub fn take_lane(request: &mut RunRequest) -> Option<Lane> {
    request.lane.take()
}

/// `namespace` as the bootstraps read it: `{global, names, errorClass: {name, member}?}`.
pub fn bootstrap_form(namespace: &BindingNamespace) -> serde_json::Value {
    namespace.bootstrap_form()
}
