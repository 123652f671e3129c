//! Guard plugins (SPEC §6): the timeout policy and the repeat-call reminder.
