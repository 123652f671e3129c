//! Guards: the two built-in guards, the timeout policy (`timeout_policy.rs`) and the repeat-call
//! reminder (`repeat_call_reminder.rs`). The per-call guard check (`Registry::guard`) stores the
//! shape `hooks` defines beside the other hook shapes.
//!
//! Both built-ins are ordinary pipeline extensions: the timeout policy is an execute wrapper, the
//! reminder a post-execute hook. Install them with their `install` methods.

mod repeat_call_reminder;
mod timeout_policy;

pub use repeat_call_reminder::{ReminderConfig, ReminderConfigError, RepeatCallReminder};
pub use timeout_policy::TimeoutPolicy;
