//! Guard plugins (SPEC §6): the timeout policy and the repeat-call reminder.
//!
//! Both are ordinary pipeline extensions: the timeout policy is an execute wrapper, the reminder
//! a post-execute hook. Install them with their `install` methods.

mod reminder;
mod timeout;

pub use reminder::{ReminderConfig, ReminderConfigError, RepeatCallReminder};
pub use timeout::TimeoutPolicy;
