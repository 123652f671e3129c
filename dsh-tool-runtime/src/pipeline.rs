//! The execution pipeline's hook types (SPEC §4).
