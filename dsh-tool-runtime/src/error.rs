//! Error codes and the error type tool bodies return.

use std::fmt;

/// The wire codes of the results the runtime itself produces, plus user codes.
///
/// `Display` prints the wire string (`INVALID_ARGS`, …), which is what lands in
/// [`ErrorInfo::code`](crate::ErrorInfo).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Arguments did not match the parameters schema (`ToolArgsError`).
    InvalidArgs,
    /// The body, a wrapper or a post-execute hook produced a value that breaks the output schema
    /// (`ToolOutputError`).
    InvalidToolOutput,
    /// The tool is not visible to the caller's scope (`ToolNotFoundError`).
    UnknownTool,
    /// Cancelled by its caller once the body had started: whatever the body returned, unless it
    /// failed with a code of its own (`AbortError`).
    Aborted,
    /// Cancellation prevented the body from running (`AbortError`).
    AbortedBeforeDispatch,
    /// The timeout policy's own deadline fired (`ToolTimeoutError`).
    ToolTimeout,
    /// A `run_code` program failed (`CodeRunFailedError`).
    CodeRunFailed,
    /// A schema could not be accepted (`JsonSchemaError`).
    UnsupportedSchema,
    /// A guard refused the call (`ToolDeniedError`); the message is the guard's reason.
    Denied,
    /// The body panicked and the runtime contained it (`ToolPanicError`): the message is
    /// `tool "<name>" panicked: <payload>`. Unlike a tool's own error this is a failure of the
    /// server, so an MCP task whose call ends with it ends `failed` (SEP-2663's protocol-level
    /// error) rather than `completed` with `isError`.
    ToolPanicked,
    /// The tool could not do its work because the server failed, not because of the request
    /// or the work (`InternalError`): a tool returns it
    /// (`ToolError::coded(ErrorCode::Internal, message)`) where a result with `isError` would
    /// misreport the call as answered. Over MCP, whose tools report "server errors" as
    /// protocol errors, a plain `tools/call` is answered with JSON-RPC `-32603` (the message,
    /// `data.code` `"INTERNAL_ERROR"`) and a task ends `failed` with that error, as for
    /// [`ToolPanicked`](Self::ToolPanicked); any other consumer sees an ordinary coded
    /// failure.
    Internal,
    /// A code chosen by a tool author, e.g. `ENOSPC`.
    Other(String),
}

impl ErrorCode {
    /// The wire string of this code.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidArgs => "INVALID_ARGS",
            ErrorCode::InvalidToolOutput => "INVALID_TOOL_OUTPUT",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::CodeRunFailed => "CODE_RUN_FAILED",
            ErrorCode::UnsupportedSchema => "UNSUPPORTED_SCHEMA",
            ErrorCode::Denied => "DENIED",
            ErrorCode::ToolPanicked => "TOOL_PANICKED",
            ErrorCode::Internal => "INTERNAL_ERROR",
            ErrorCode::Other(code) => code,
        }
    }

    /// The error name that goes with the code (`ToolArgsError`, …); `ToolError` for user codes.
    pub fn error_name(&self) -> &'static str {
        match self {
            ErrorCode::InvalidArgs => "ToolArgsError",
            ErrorCode::InvalidToolOutput => "ToolOutputError",
            ErrorCode::UnknownTool => "ToolNotFoundError",
            ErrorCode::Aborted | ErrorCode::AbortedBeforeDispatch => "AbortError",
            ErrorCode::ToolTimeout => "ToolTimeoutError",
            ErrorCode::CodeRunFailed => "CodeRunFailedError",
            ErrorCode::UnsupportedSchema => "JsonSchemaError",
            ErrorCode::Denied => "ToolDeniedError",
            ErrorCode::ToolPanicked => "ToolPanicError",
            ErrorCode::Internal => "InternalError",
            ErrorCode::Other(_) => "ToolError",
        }
    }

    /// Parses a wire string; unknown strings become [`ErrorCode::Other`].
    pub fn from_wire(code: &str) -> Self {
        match code {
            "INVALID_ARGS" => ErrorCode::InvalidArgs,
            "INVALID_TOOL_OUTPUT" => ErrorCode::InvalidToolOutput,
            "UNKNOWN_TOOL" => ErrorCode::UnknownTool,
            "ABORTED" => ErrorCode::Aborted,
            "ABORTED_BEFORE_DISPATCH" => ErrorCode::AbortedBeforeDispatch,
            "TOOL_TIMEOUT" => ErrorCode::ToolTimeout,
            "CODE_RUN_FAILED" => ErrorCode::CodeRunFailed,
            "UNSUPPORTED_SCHEMA" => ErrorCode::UnsupportedSchema,
            "DENIED" => ErrorCode::Denied,
            "TOOL_PANICKED" => ErrorCode::ToolPanicked,
            "INTERNAL_ERROR" => ErrorCode::Internal,
            other => ErrorCode::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error a tool body returns: a message, and optionally a code and a name, like DSH's
/// `HarnessError`.
///
/// Without a code the model sees `Error: <message>` and the result carries no
/// [`ErrorInfo`](crate::ErrorInfo); with one, `info = { name, code }` (name defaults to
/// `ToolError`).
///
/// ```
/// use dsh_tool_runtime::ToolError;
/// let err = ToolError::new("disk full").with_code("ENOSPC");
/// assert_eq!(err.code(), Some("ENOSPC"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    code: Option<String>,
    name: Option<String>,
}

impl ToolError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            code: None,
            name: None,
        }
    }

    /// An error carrying one of the runtime's codes, named after it (`INVALID_ARGS` ⇒
    /// `ToolArgsError`).
    pub fn coded(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            name: Some(code.error_name().to_owned()),
            code: Some(code.as_str().to_owned()),
        }
    }

    /// The error a body returns when it stops because its signal fired: `ABORTED`
    /// (`AbortError`), message `tool call aborted`. A call whose caller cancelled reads
    /// `ABORTED` anyway when its body returns any error without a code; this says so explicitly.
    ///
    /// ```
    /// use dsh_tool_runtime::ToolError;
    /// assert_eq!(ToolError::cancelled().code(), Some("ABORTED"));
    /// ```
    pub fn cancelled() -> Self {
        ToolError::coded(ErrorCode::Aborted, "tool call aborted")
    }

    /// Attaches a wire code such as `ENOSPC`.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Attaches an error name (default `ToolError` once a code is set).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The message, without the `Error: ` prefix the model sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wire code, if any.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The error name, if a code or a name was set.
    pub fn name(&self) -> Option<&str> {
        match (&self.name, &self.code) {
            (Some(name), _) => Some(name),
            (None, Some(_)) => Some("ToolError"),
            (None, None) => None,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_internal_code_round_trips_through_its_wire_string() {
        let error = ToolError::coded(ErrorCode::Internal, "the database is down");
        assert_eq!(error.code(), Some("INTERNAL_ERROR"));
        assert_eq!(error.name(), Some("InternalError"));
        assert_eq!(ErrorCode::from_wire("INTERNAL_ERROR"), ErrorCode::Internal);
    }
}
