//! Subprocess code runtimes (SPEC §8): run a model-written program in a fresh child per run.
