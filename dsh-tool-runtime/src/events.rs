//! Events published for every call (SPEC §10).
