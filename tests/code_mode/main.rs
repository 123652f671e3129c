//! Code mode end to end in one test binary: `run_code` over the registry and its results.
//! (`code_mode_cancel` counts this process's children and stays a binary of its own.)

#[path = "../common/mod.rs"]
mod common;

mod results;
mod run_code;
