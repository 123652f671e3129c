//! A small real toolset over a directory tree: list files, read a window of a file, grep, and
//! file statistics. The `dsh-tools` command's `--builtin repo`; also used by the `quickstart` and
//! `code_mode` examples and by the tests that pin their schemas and the committed SDK.
//!
//! Each tool presents itself to a UI: `read_file` as a `read` card, `grep` as `search`
//! matches, `list_files` as `search` paths, `file_stats` as a generic card.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use dsh_tools::presentation::{
    CallView, FileLocation, ReadLine, ResultView, SearchFile, SearchMatch, SearchShape,
    ToolCallKind,
};
use dsh_tools::{CancellationToken, ToolDefinition, ToolError, ToolExec, tool, toolbox};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

#[path = "confined.rs"]
mod confined;

use confined::{ConfinedError, Kind, Root};

/// The longest path a tool takes, in bytes (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

/// The longest line `read_file` returns whole, in bytes; a longer one is cut, with a note of how
/// many bytes were left out.
const MAX_LINE_BYTES: usize = 16 * 1024;

/// The longest matching line `grep` returns whole, in bytes.
const MAX_MATCH_LINE_BYTES: usize = 1024;

/// The longest line `grep` matches against, in bytes: a longer line is searched in its first
/// part only, so memory stays bounded on a file of one huge line.
const MAX_SEARCHED_LINE_BYTES: usize = 1024 * 1024;

/// The most text one `read_file` window returns, in bytes; a window asked for beyond it ends
/// early (its `lines` are fewer than asked, and `total_lines` says how many remain).
const MAX_WINDOW_BYTES: usize = 1024 * 1024;

/// The largest compiled `grep` pattern, in bytes (the `regex` crate's size limit; matching time
/// is linear in the input, so the size of the program is what needs bounding).
const MAX_PATTERN_BYTES: usize = 1024 * 1024;

/// Read-only file tools confined to one root directory.
///
/// Paths are resolved by the kernel below a handle of the root opened once (see `confined.rs`):
/// no symbolic link, `..` or magic link leads out of it, only regular files are read, and reads
/// stream in bounded chunks on tokio's blocking pool, stopping when the call is cancelled or
/// times out.
pub(crate) struct RepoTools {
    root: Result<Arc<Root>, String>,
}

/// One entry of `list_files`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileEntry {
    /// Path relative to the root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// What `read_file` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReadWindow {
    /// Path relative to the root.
    pub path: String,
    /// 1-based number of the first line returned.
    pub offset: u64,
    /// The lines, without their line endings.
    pub lines: Vec<String>,
    /// Number of lines in the whole file.
    pub total_lines: u64,
}

/// One `grep` hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GrepMatch {
    /// Path relative to the root.
    pub path: String,
    /// 1-based line number.
    pub line_number: u64,
    /// The matching line.
    pub line: String,
}

/// What `grep` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GrepResult {
    /// The hits, in path then line order.
    pub matches: Vec<GrepMatch>,
    /// `true` when `max_matches` cut the list.
    pub truncated: bool,
}

/// What `file_stats` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileStats {
    /// Path relative to the root.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Number of lines (0 for directories).
    pub lines: u64,
    /// `true` for a directory.
    pub is_dir: bool,
}

/// Directories never listed: build output and dependency caches.
const SKIPPED_DIRS: [&str; 4] = ["target", "node_modules", ".git", ".tools"];

impl RepoTools {
    /// Tools confined to `root`. A root that cannot be opened makes every call fail with the
    /// reason.
    pub(crate) fn new(root: impl Into<PathBuf>) -> Arc<Self> {
        let root = root.into();
        let root = Root::open(&root)
            .map(Arc::new)
            .map_err(|error| format!("cannot open the root {}: {error}", root.display()));
        Arc::new(RepoTools { root })
    }

    /// Checks a path's form, refusing absolute paths and `..` with a clear message; the
    /// confinement itself is the kernel's, at the open.
    fn check(&self, path: &str) -> Result<(), ToolError> {
        // Longer than any path the system opens (PATH_MAX); not worth echoing back whole.
        if path.len() > MAX_PATH_BYTES {
            return Err(ToolError::new(format!(
                "path is {} bytes; at most {MAX_PATH_BYTES} are accepted",
                path.len()
            ))
            .with_code("EPATH"));
        }
        if Path::new(path)
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(ToolError::new(format!(
                "path \"{path}\" must be relative to the root and must not contain .."
            ))
            .with_code("EPATH"));
        }
        Ok(())
    }

    /// Runs `work` on tokio's blocking pool with the root and the call's signal; the call
    /// settles as soon as the signal fires, and `work` stops at its next chunk.
    async fn blocking<T: Send + 'static>(
        &self,
        exec: &ToolExec,
        work: impl FnOnce(&Root, &CancellationToken) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let root = self.root.clone().map_err(ToolError::new)?;
        let signal = exec.signal().clone();
        let task = tokio::task::spawn_blocking(move || work(&root, &signal));
        tokio::select! {
            joined = task => joined.map_err(|error| ToolError::new(format!("file task failed: {error}")))?,
            () = exec.signal().cancelled() => Err(ToolError::cancelled()),
        }
    }
}

/// A confined open's or read's failure as the tool's error, with `code`.
fn failure(action: &str, path: &str, error: ConfinedError, code: &str) -> ToolError {
    match error {
        ConfinedError::Cancelled => ToolError::cancelled(),
        ConfinedError::Escapes => {
            ToolError::new(format!("cannot {action} {path}: {error}")).with_code("EPATH")
        }
        error => ToolError::new(format!("cannot {action} {path}: {error}")).with_code(code),
    }
}

/// A line's bytes as text: invalid UTF-8 replaced, a cut line ending with how much was cut.
fn line_text(bytes: &[u8], cut: u64) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if cut > 0 {
        text.push_str(&format!(" … [{cut} more bytes]"));
    }
    text
}

#[toolbox]
impl RepoTools {
    /// List the files below a directory of the repository, sorted by path.
    #[tool(
        title = "List files",
        concurrency_safe,
        read_only,
        open_world = false,
        timeout_ms = 30_000,
        present_call = present_list_files,
        present_result = present_listed_files
    )]
    async fn list_files(
        &self,
        /// Directory relative to the repository root; `.` for the root itself.
        #[arg(default = ".".to_owned())]
        dir: String,
        /// Keep only paths ending with this suffix, e.g. `.rs`.
        suffix: Option<String>,
        /// Most entries to return.
        #[arg(default = 1000, range(min = 1, max = 100000))]
        limit: u32,
        exec: ToolExec,
    ) -> Result<Vec<FileEntry>, ToolError> {
        self.check(&dir)?;
        let walk = self
            .blocking(&exec, move |root, signal| {
                root.walk(&dir, &SKIPPED_DIRS, signal)
                    .map_err(|error| failure("list", &dir, error, "ELIST"))
            })
            .await?;
        if walk.non_utf8 > 0 {
            tracing::warn!(
                count = walk.non_utf8,
                "list_files left out entries whose names are not UTF-8"
            );
        }
        Ok(walk
            .files
            .into_iter()
            .filter(|(path, _)| {
                suffix
                    .as_deref()
                    .is_none_or(|suffix| path.ends_with(suffix))
            })
            .take(limit as usize)
            .map(|(path, bytes)| FileEntry { path, bytes })
            .collect())
    }

    /// Read a window of lines from a UTF-8 text file of the repository.
    #[tool(
        title = "Read file",
        concurrency_safe,
        read_only,
        open_world = false,
        timeout_ms = 5_000,
        present_call = present_read_file,
        present_result = present_read_window,
        presentation_meta = read_file_meta
    )]
    async fn read_file(
        &self,
        /// File path relative to the repository root.
        #[arg(length(min = 1))]
        path: String,
        /// First line to return, 1-based.
        #[arg(default = 1, range(min = 1))]
        offset: u64,
        /// Most lines to return; all remaining lines when absent.
        limit: Option<u32>,
        exec: ToolExec,
    ) -> Result<ReadWindow, ToolError> {
        self.check(&path)?;
        let skip = usize::try_from(offset - 1).unwrap_or(usize::MAX);
        let want = limit.map_or(usize::MAX, |limit| limit as usize);
        let shown = path.clone();
        let (lines, total_lines) = self
            .blocking(&exec, move |root, signal| {
                let file = root
                    .open_file(&shown)
                    .map_err(|error| failure("read", &shown, error, "EREAD"))?;
                let mut lines = Vec::new();
                let mut window_bytes = 0usize;
                let mut total = 0usize;
                confined::for_each_line(file, MAX_LINE_BYTES, signal, |bytes, cut| {
                    if total >= skip && lines.len() < want && window_bytes < MAX_WINDOW_BYTES {
                        window_bytes += bytes.len();
                        lines.push(line_text(bytes, cut));
                    }
                    total += 1;
                    true
                })
                .map_err(|error| failure("read", &shown, error, "EREAD"))?;
                Ok((lines, total as u64))
            })
            .await?;
        Ok(ReadWindow {
            path,
            offset,
            lines,
            total_lines,
        })
    }

    /// Search the repository's text files for a regular expression, line by line.
    #[tool(
        title = "Grep",
        concurrency_safe,
        read_only,
        open_world = false,
        timeout_ms = 30_000,
        present_call = present_grep,
        present_result = present_grep_matches
    )]
    async fn grep(
        &self,
        /// A regular expression (Rust `regex` syntax).
        #[arg(length(min = 1))]
        pattern: String,
        /// Directory to search, relative to the repository root.
        #[arg(default = ".".to_owned())]
        dir: String,
        /// Most matches to return.
        #[arg(default = 200, range(min = 1, max = 10000))]
        max_matches: u32,
        exec: ToolExec,
    ) -> Result<GrepResult, ToolError> {
        let regex = regex::bytes::RegexBuilder::new(&pattern)
            .size_limit(MAX_PATTERN_BYTES)
            .dfa_size_limit(MAX_PATTERN_BYTES)
            .build()
            .map_err(|err| {
                ToolError::new(format!("invalid pattern: {err}")).with_code("EPATTERN")
            })?;
        self.check(&dir)?;
        let max_matches = max_matches as usize;
        self.blocking(&exec, move |root, signal| {
            let walk = root
                .walk(&dir, &SKIPPED_DIRS, signal)
                .map_err(|error| failure("search", &dir, error, "ELIST"))?;
            let mut matches = Vec::new();
            let mut truncated = false;
            for (path, _) in walk.files {
                // A file swapped for something else since the walk is skipped, as an unreadable one.
                let Ok(file) = root.open_file(&path) else {
                    continue;
                };
                let mut line_number = 0u64;
                let searched =
                    confined::for_each_line(file, MAX_SEARCHED_LINE_BYTES, signal, |bytes, cut| {
                        line_number += 1;
                        if !regex.is_match(bytes) {
                            return true;
                        }
                        if matches.len() == max_matches {
                            truncated = true;
                            return false;
                        }
                        let kept = bytes.len().min(MAX_MATCH_LINE_BYTES);
                        matches.push(GrepMatch {
                            path: path.clone(),
                            line_number,
                            line: line_text(&bytes[..kept], (bytes.len() - kept) as u64 + cut),
                        });
                        true
                    });
                match searched {
                    Err(ConfinedError::Cancelled) => return Err(ToolError::cancelled()),
                    _ if truncated => break,
                    _ => {}
                }
            }
            Ok(GrepResult { matches, truncated })
        })
        .await
    }

    /// Size, line count and kind of a file or directory of the repository.
    #[tool(
        title = "File stats",
        concurrency_safe,
        read_only,
        open_world = false,
        timeout_ms = 30_000,
        present_call = present_file_stats
    )]
    async fn file_stats(
        &self,
        /// Path relative to the repository root.
        path: String,
        exec: ToolExec,
    ) -> Result<FileStats, ToolError> {
        self.check(&path)?;
        let shown = path.clone();
        let (bytes, lines, is_dir) = self
            .blocking(&exec, move |root, signal| {
                let stat = |error| failure("stat", &shown, error, "ESTAT");
                match root.kind(&shown).map_err(stat)? {
                    Kind::Dir => Ok((0, 0, true)),
                    Kind::File { bytes } => {
                        let file = root.open_file(&shown).map_err(stat)?;
                        let lines = confined::count_newlines(file, signal).map_err(stat)?;
                        Ok((bytes, lines, false))
                    }
                }
            })
            .await?;
        Ok(FileStats {
            path,
            bytes,
            lines,
            is_dir,
        })
    }
}

/// The toolset's definitions for `root`.
pub(crate) fn definitions(root: impl Into<PathBuf>) -> Vec<ToolDefinition> {
    RepoTools::new(root).tools()
}

fn present_list_files(args: &ListFilesArgs) -> Option<CallView> {
    let filter = args
        .suffix
        .as_deref()
        .map(|suffix| format!(" (*{suffix})"))
        .unwrap_or_default();
    Some(CallView::Generic {
        title: format!("List files in {}{filter}", args.dir),
        kind: ToolCallKind::Search,
        raw_input: None,
        content: Vec::new(),
        locations: vec![FileLocation {
            path: args.dir.clone(),
            line: None,
        }],
    })
}

fn present_listed_files(
    args: &ListFilesArgs,
    entries: &[FileEntry],
    _meta: Option<&Value>,
) -> Option<ResultView> {
    Some(ResultView::Search {
        title: Some(format!("{} files", entries.len())),
        shape: SearchShape::Paths {
            paths: entries.iter().map(|entry| entry.path.clone()).collect(),
        },
        // `limit` cut the walk exactly when it was reached.
        truncated: entries.len() == args.limit as usize,
        total: entries.len() as u64,
    })
}

fn present_read_file(args: &ReadFileArgs) -> Option<CallView> {
    Some(CallView::Generic {
        title: format!("Read {}", args.path),
        kind: ToolCallKind::Read,
        raw_input: None,
        content: Vec::new(),
        locations: vec![FileLocation {
            path: args.path.clone(),
            line: Some(args.offset),
        }],
    })
}

/// The language of a path for highlighting: a UI concern the model's output does not carry.
fn read_file_meta(args: &ReadFileArgs, _window: &ReadWindow) -> Option<Value> {
    let lang = match Path::new(&args.path).extension()?.to_str()? {
        "rs" => "rust",
        "ts" | "mts" => "typescript",
        "js" | "mjs" => "javascript",
        "py" => "python",
        "md" => "markdown",
        "toml" => "toml",
        "json" => "json",
        "sh" => "shell",
        _ => return None,
    };
    Some(json!({ "lang": lang }))
}

fn present_read_window(
    _args: &ReadFileArgs,
    window: &ReadWindow,
    meta: Option<&Value>,
) -> Option<ResultView> {
    Some(ResultView::Read {
        title: None,
        path: window.path.clone(),
        offset: window.offset,
        lines: window
            .lines
            .iter()
            .zip(window.offset..)
            .map(|(text, number)| ReadLine {
                number,
                text: text.clone(),
            })
            .collect(),
        total_lines: window.total_lines,
        lang: meta
            .and_then(|meta| meta["lang"].as_str())
            .map(str::to_owned),
    })
}

fn present_grep(args: &GrepArgs) -> Option<CallView> {
    Some(CallView::Generic {
        title: format!("Search /{}/ in {}", args.pattern, args.dir),
        kind: ToolCallKind::Search,
        raw_input: None,
        content: Vec::new(),
        locations: Vec::new(),
    })
}

fn present_grep_matches(
    _args: &GrepArgs,
    result: &GrepResult,
    _meta: Option<&Value>,
) -> Option<ResultView> {
    // Hits come in path then line order: consecutive hits of one path form its group.
    let mut files: Vec<SearchFile> = Vec::new();
    for hit in &result.matches {
        let found = SearchMatch {
            line_number: hit.line_number,
            line: hit.line.clone(),
        };
        match files.last_mut() {
            Some(file) if file.path == hit.path => file.matches.push(found),
            _ => files.push(SearchFile {
                path: hit.path.clone(),
                matches: vec![found],
            }),
        }
    }
    Some(ResultView::Search {
        title: Some(format!(
            "{} matches in {} files",
            result.matches.len(),
            files.len()
        )),
        shape: SearchShape::Matches { files },
        truncated: result.truncated,
        total: result.matches.len() as u64,
    })
}

fn present_file_stats(args: &FileStatsArgs) -> Option<CallView> {
    Some(CallView::Generic {
        title: format!("Stat {}", args.path),
        kind: ToolCallKind::Read,
        raw_input: None,
        content: Vec::new(),
        locations: vec![FileLocation {
            path: args.path.clone(),
            line: None,
        }],
    })
}
