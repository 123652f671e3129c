//! Why a registration, restriction or presentation change was refused.

use crate::registry::Mode;

/// Why a registration, restriction or presentation change was refused. Messages follow
/// DSH's wording where the rule is the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// `run_code` is reserved for the code-mode transport.
    #[error(
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    )]
    Reserved,
    /// The name is taken in the global layer.
    #[error(
        "tool \"{0}\" is already registered (for a per-agent variant, register it in that agent's scope instead)"
    )]
    DuplicateGlobal(String),
    /// The name is taken in this agent's layer.
    #[error("tool \"{0}\" is already registered in this scope")]
    DuplicateScoped(String),
    /// A declared timeout of 0 ms.
    #[error("tool \"{0}\" timeout_ms must be a positive finite number")]
    InvalidTimeout(String),
    /// An empty filter.
    #[error("restrict() with an empty filter is a no-op; name at least one tool")]
    EmptyFilter,
    /// A filter naming `run_code`.
    #[error("restrict() cannot name \"run_code\": it is outside tool filtering")]
    RestrictRunCode,
    /// A filter naming tools the scope does not inherit.
    #[error("restrict() names unknown global tool(s) {unknown}; known global tools: {known}")]
    UnknownInFilter {
        /// The offending names, quoted and comma-separated.
        unknown: String,
        /// The restrictable names, sorted, comma-separated, or `(none)`.
        known: String,
    },
    /// A second `present_as` in one scope.
    #[error(
        "present_as(\"{new}\") conflicts with \"{old}\" already declared for this scope; remove the earlier declaration first"
    )]
    ModeConflict {
        /// The mode asked for.
        new: Mode,
        /// The mode already declared.
        old: Mode,
    },
}
