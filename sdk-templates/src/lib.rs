//! The texts dsh-tools embeds at compile time: the SDK templates its generator renders and the
//! bootstraps its code runtimes run programs in. Depend on the `dsh-tools` facade instead.
//!
//! Each constant is one file of this crate's folder, unchanged (UTF-8, `\n` line ends). The
//! templates are minijinja sources rendered by `dsh-tool-runtime`'s SDK generator; the
//! JavaScript bootstraps have `/* @include NAME.js */` markers that the runtime replaces with
//! [`LOSSLESS_JSON`], [`BINDING_ERROR`] and [`FAILURE_TEXT`] before a run. The texts are a
//! private contract between the crates of one dsh-tools release: their parameters and
//! protocols change with it.
//!
//! Used by `dsh-tool-runtime` (the SDK generator and the code runtimes); it depends on nothing.

#![no_std]
#![forbid(unsafe_code)]

/// The TypeScript declarations of a registry's tools (minijinja): a whole `tools.ts` file, a
/// prompt section or the declarations alone, as the context's `part` says.
pub const SDK_TOOLS_TS: &str = include_str!("../sdk_tools.ts.j2");

/// The Python declarations of a registry's tools (minijinja), with the same parts as
/// [`SDK_TOOLS_TS`].
pub const SDK_TOOLS_PY: &str = include_str!("../sdk_tools.py.j2");

/// The TypeScript tool index (minijinja): the guide, then one line per tool with its summary.
pub const SDK_INDEX_TS: &str = include_str!("../sdk_index.ts.j2");

/// The Python tool index (minijinja), laid out as [`SDK_INDEX_TS`].
pub const SDK_INDEX_PY: &str = include_str!("../sdk_index.py.j2");

/// The guide to writing a TypeScript `run_code` program (minijinja): its globals, calls,
/// failures and what comes back.
pub const SDK_GUIDE_TS: &str = include_str!("../sdk_guide.ts.md");

/// The guide to writing a Python `run_code` program (minijinja), as [`SDK_GUIDE_TS`].
pub const SDK_GUIDE_PY: &str = include_str!("../sdk_guide.py.md");

/// The Node.js bootstrap of the TypeScript subprocess runtime (an ES module): newline-delimited
/// JSON frames to the host on fd 3 and from it on fd 4.
pub const WORKER_MJS: &str = include_str!("../worker.mjs");

/// The CPython bootstrap of the Python subprocess runtime, with the protocol of [`WORKER_MJS`].
pub const WORKER_PY: &str = include_str!("../worker.py");

/// The bootstrap of the embedded TypeScript runtime: one JavaScript function expression that
/// QuickJS evaluates in a fresh context with the host's object.
pub const EMBEDDED_QUICKJS_JS: &str = include_str!("../embedded_quickjs.js");

/// The lossless JSON encoder both JavaScript bootstraps include at
/// `/* @include lossless_json.js */`.
pub const LOSSLESS_JSON: &str = include_str!("../lossless_json.js");

/// The binding error class both JavaScript bootstraps include at
/// `/* @include binding_error.js */`.
pub const BINDING_ERROR: &str = include_str!("../binding_error.js");

/// How a program's failure is told (its own stack frames, first-line columns, the cause chain),
/// which both JavaScript bootstraps include at `/* @include failure_text.js */`.
pub const FAILURE_TEXT: &str = include_str!("../failure_text.js");
