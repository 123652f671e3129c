//! The UI card vocabulary for pending and completed calls: the cards ([`CallView`],
//! [`ResultView`]) and what they are made of. Events carry them, tools draw them, and
//! [`presentation`](crate::presentation) re-exports them beside the presenters and the replay page.

use serde::{Deserialize, Serialize};

use crate::result::ContentBlock;

/// What kind of work a call does; UIs pick an icon from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallKind {
    /// Reads data.
    Read,
    /// Edits a file.
    Edit,
    /// Deletes something.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs a command or program.
    Execute,
    /// Fetches from the network.
    Fetch,
    /// Anything else.
    #[default]
    Other,
}

/// A file position; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLocation {
    /// File path.
    pub path: String,
    /// 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// One file's change; `old_text: None` means a new file or unknown prior content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    /// File path.
    pub path: String,
    /// Text before the change.
    pub old_text: Option<String>,
    /// Text after the change.
    pub new_text: String,
}

/// The pending-state card of a call (`present_call`); `None` means the generic card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallView {
    /// Title, kind, raw input and optional content.
    Generic {
        /// Card title.
        title: String,
        /// What kind of work.
        #[serde(default)]
        kind: ToolCallKind,
        /// Raw input shown as-is (strings) or pretty JSON (objects).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_input: Option<serde_json::Value>,
        /// Extra content.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        content: Vec<ContentBlock>,
        /// Files the call touches.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<FileLocation>,
    },
    /// A shell command.
    Terminal {
        /// The command.
        title: String,
        /// One-liner shown above the card.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Working directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// File edits.
    Diff {
        /// Card title.
        title: String,
        /// The diffs.
        diffs: Vec<FileDiff>,
        /// Files the call touches.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<FileLocation>,
    },
}

/// One search hit; `line_number` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchMatch {
    /// 1-based line number.
    pub line_number: u64,
    /// The line's text.
    pub line: String,
}

/// The hits in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchFile {
    /// File path.
    pub path: String,
    /// Hits in the file.
    pub matches: Vec<SearchMatch>,
}

/// One line of a read window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadLine {
    /// 1-based line number.
    pub number: u64,
    /// The line's text.
    pub text: String,
}

/// The shape of a search result card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SearchShape {
    /// Matching lines grouped by file.
    Matches {
        /// Files with hits.
        files: Vec<SearchFile>,
    },
    /// Matching paths.
    Paths {
        /// The paths.
        paths: Vec<String>,
    },
}

/// The completed-state card of a call (`present_result`); `None` keeps the pending title and the
/// raw content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultView {
    /// Title and content.
    Generic {
        /// Card title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Content.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        content: Vec<ContentBlock>,
    },
    /// Command output; `exit_code` and `signal` exclude each other.
    Terminal {
        /// Card title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Output text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// Exit code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Terminating signal name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// File edits.
    Diff {
        /// Card title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// The diffs.
        diffs: Vec<FileDiff>,
    },
    /// Search hits.
    Search {
        /// Card title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Hits.
        #[serde(flatten)]
        shape: SearchShape,
        /// More hits existed than shown.
        truncated: bool,
        /// Total hits.
        total: u64,
    },
    /// A window of a file.
    Read {
        /// Card title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// File path.
        path: String,
        /// 1-based first requested line (kept for empty windows).
        offset: u64,
        /// The lines shown.
        lines: Vec<ReadLine>,
        /// Lines in the file.
        total_lines: u64,
        /// Language hint for highlighting.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lang: Option<String>,
    },
}
