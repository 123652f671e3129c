//! How a scope presents tools to the model.

use serde::Serialize;

/// How a scope presents tools to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mode {
    /// Every visible tool as a native tool schema.
    #[default]
    Native,
    /// Only `run_code`; other tools are reached from inside programs.
    Code,
    /// Native schemas plus `run_code`.
    Both,
}

impl Mode {
    /// The mode's name: `native`, `code` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Code => "code",
            Mode::Both => "both",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
