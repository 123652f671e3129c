//! Every signature shape, with `dsh-tools` as the only dependency.

pub mod deny_warnings;

use std::sync::Arc;

use dsh_tools::schemars::JsonSchema;
use dsh_tools::serde::{Deserialize, Serialize};
use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool, tool_type, toolbox};

/// A parameter type of the crate's own, derived by hand through `dsh_tools` alone.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(crate = "dsh_tools::serde", rename_all = "snake_case")]
#[schemars(crate = "dsh_tools::schemars")]
pub enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// An output type of the crate's own.
#[tool_type]
pub struct Reading {
    /// The temperature.
    pub degrees: f64,
    /// The unit asked for.
    pub unit: Unit,
}

/// Read the thermometer.
#[tool]
pub async fn thermometer(unit: Unit) -> Result<Reading, ToolError> {
    let degrees = match unit {
        Unit::Celsius => 21.0,
        Unit::Fahrenheit => 69.8,
    };
    Ok(Reading { degrees, unit })
}

/// Read a UTF-8 text file and return a window of its lines.
#[tool(concurrency_safe, timeout_ms = 5_000)]
pub async fn read_file(
    /// Absolute path of the file.
    #[arg(length(min = 1), pattern = "^/")]
    path: String,
    /// First line to return, 1-based.
    #[arg(default = 1, range(min = 1))]
    offset: u64,
    /// Maximum number of lines.
    limit: Option<u32>,
    exec: ToolExec,
) -> Result<Vec<String>, ToolError> {
    let _ = (offset, limit, exec);
    Ok(vec![path])
}

/// Holds notes.
pub struct Notes {
    prefix: String,
}

#[toolbox]
impl Notes {
    /// Prefix a note.
    #[tool]
    pub async fn note(&self, text: String) -> String {
        format!("{}{text}", self.prefix)
    }
}

/// All tools of this crate.
pub fn definitions() -> Vec<ToolDefinition> {
    let mut definitions = vec![
        ToolDefinition::from_tool(ReadFileTool),
        ToolDefinition::from_tool(ThermometerTool),
    ];
    definitions.extend(
        Arc::new(Notes {
            prefix: String::new(),
        })
        .tools(),
    );
    definitions
}
