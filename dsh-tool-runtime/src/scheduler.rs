//! The order-preserving batch scheduler (SPEC §7).
