//! Schema dialects (SPEC §3): one derived schema, several provider wire forms.
