//! Guards: the per-call guard check (`Registry::guard`), and the two built-in guards, the timeout
//! policy (`timeout_policy.rs`) and the repeat-call reminder (`repeat_call_reminder.rs`).
//!
//! Both built-ins are ordinary pipeline extensions: the timeout policy is an execute wrapper, the
//! reminder a post-execute hook. Install them with their `install` methods.

mod repeat_call_reminder;
mod timeout_policy;

use std::sync::Arc;

use crate::hooks::ToolCallView;

pub use repeat_call_reminder::{ReminderConfig, ReminderConfigError, RepeatCallReminder};
pub use timeout_policy::TimeoutPolicy;

/// A guard as stored: `Some(reason)` denies the call (see `Registry::guard`).
pub(crate) type Guard = Arc<dyn Fn(&ToolCallView) -> Option<String> + Send + Sync>;
