//! A small real toolset over a directory tree: list files, read a window of a file, grep, and
//! file statistics. The `dsh-tools` command's `--builtin repo`; also used by the `quickstart` and
//! `code_mode` examples and by the tests that pin their schemas and the committed SDK.
//!
//! Each tool presents itself to a UI (SPEC §10): `read_file` as a `read` card, `grep` as `search`
//! matches, `list_files` as `search` paths, `file_stats` as a generic card.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use dsh_tools::presentation::{FileLocation, ReadLine, SearchFile, SearchMatch, SearchShape};
use dsh_tools::{
    CallView, ResultView, ToolCallKind, ToolDefinition, ToolError, ToolExec, tool, toolbox,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// The longest path a tool takes, in bytes (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

/// Read-only file tools confined to one root directory.
pub struct RepoTools {
    root: PathBuf,
}

/// One entry of `list_files`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileEntry {
    /// Path relative to the root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// What `read_file` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadWindow {
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
pub struct GrepMatch {
    /// Path relative to the root.
    pub path: String,
    /// 1-based line number.
    pub line_number: u64,
    /// The matching line.
    pub line: String,
}

/// What `grep` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepResult {
    /// The hits, in path then line order.
    pub matches: Vec<GrepMatch>,
    /// `true` when `max_matches` cut the list.
    pub truncated: bool,
}

/// What `file_stats` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileStats {
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
    /// Tools confined to `root`.
    pub fn new(root: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(RepoTools { root: root.into() })
    }

    /// Resolves a path relative to the root, refusing absolute paths and `..`.
    fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        // Longer than any path the system opens (PATH_MAX); not worth echoing back whole.
        if path.len() > MAX_PATH_BYTES {
            return Err(ToolError::new(format!(
                "path is {} bytes; at most {MAX_PATH_BYTES} are accepted",
                path.len()
            ))
            .with_code("EPATH"));
        }
        let relative = Path::new(path);
        if relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(ToolError::new(format!(
                "path \"{path}\" must be relative to the root and must not contain .."
            ))
            .with_code("EPATH"));
        }
        Ok(self.root.join(relative))
    }

    fn relative(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Every file below `dir`, sorted by path, skipping [`SKIPPED_DIRS`].
    fn walk(&self, dir: &Path, exec: &ToolExec) -> Result<Vec<PathBuf>, ToolError> {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if exec.signal().is_cancelled() {
                return Err(ToolError::new("cancelled"));
            }
            let entries = std::fs::read_dir(&dir).map_err(|err| {
                ToolError::new(format!("cannot list {}: {err}", self.relative(&dir)))
            })?;
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if !SKIPPED_DIRS.contains(&entry.file_name().to_string_lossy().as_ref()) {
                        stack.push(path);
                    }
                } else if kind.is_file() {
                    files.push(path);
                }
            }
        }
        files.sort();
        Ok(files)
    }
}

#[toolbox]
impl RepoTools {
    /// List the files below a directory of the repository, sorted by path.
    #[tool(
        concurrency_safe,
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
        let dir = self.resolve(&dir)?;
        let files = self.walk(&dir, &exec)?;
        Ok(files
            .into_iter()
            .filter(|path| {
                suffix
                    .as_deref()
                    .is_none_or(|suffix| path.to_string_lossy().ends_with(suffix))
            })
            .take(limit as usize)
            .map(|path| FileEntry {
                bytes: path.metadata().map(|m| m.len()).unwrap_or(0),
                path: self.relative(&path),
            })
            .collect())
    }

    /// Read a window of lines from a UTF-8 text file of the repository.
    #[tool(
        concurrency_safe,
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
        let full = self.resolve(&path)?;
        let text = tokio::select! {
            text = tokio::fs::read_to_string(&full) => text.map_err(|err| ToolError::new(format!("cannot read {path}: {err}")).with_code("EREAD"))?,
            _ = exec.signal().cancelled() => return Err(ToolError::new("cancelled")),
        };
        let all: Vec<&str> = text.lines().collect();
        let start = usize::try_from(offset - 1)
            .unwrap_or(usize::MAX)
            .min(all.len());
        let end = limit.map_or(all.len(), |limit| {
            start.saturating_add(limit as usize).min(all.len())
        });
        Ok(ReadWindow {
            path,
            offset,
            lines: all[start..end]
                .iter()
                .map(|line| (*line).to_owned())
                .collect(),
            total_lines: all.len() as u64,
        })
    }

    /// Search the repository's text files for a regular expression, line by line.
    #[tool(
        concurrency_safe,
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
        let regex = regex::Regex::new(&pattern).map_err(|err| {
            ToolError::new(format!("invalid pattern: {err}")).with_code("EPATTERN")
        })?;
        let dir = self.resolve(&dir)?;
        let mut matches = Vec::new();
        for file in self.walk(&dir, &exec)? {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for (index, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() == max_matches as usize {
                        return Ok(GrepResult {
                            matches,
                            truncated: true,
                        });
                    }
                    matches.push(GrepMatch {
                        path: self.relative(&file),
                        line_number: index as u64 + 1,
                        line: line.to_owned(),
                    });
                }
            }
        }
        Ok(GrepResult {
            matches,
            truncated: false,
        })
    }

    /// Size, line count and kind of a file or directory of the repository.
    #[tool(concurrency_safe, present_call = present_file_stats)]
    async fn file_stats(
        &self,
        /// Path relative to the repository root.
        path: String,
    ) -> Result<FileStats, ToolError> {
        let full = self.resolve(&path)?;
        // One trip to the blocking pool for the stat and the read (`tokio::fs` makes one each).
        let stats = tokio::task::spawn_blocking(move || {
            let meta = std::fs::metadata(&full)?;
            let lines = if meta.is_file() {
                std::fs::read(&full)
                    .map(|bytes| bytes.iter().filter(|b| **b == b'\n').count() as u64)
                    .unwrap_or(0)
            } else {
                0
            };
            Ok::<_, std::io::Error>((meta.len(), lines, meta.is_dir()))
        })
        .await
        .map_err(|err| ToolError::new(format!("cannot stat {path}: {err}")))?;
        let (bytes, lines, is_dir) = stats.map_err(|err| {
            ToolError::new(format!("cannot stat {path}: {err}")).with_code("ESTAT")
        })?;
        Ok(FileStats {
            path,
            bytes,
            lines,
            is_dir,
        })
    }
}

/// The toolset's definitions for `root`.
pub fn definitions(root: impl Into<PathBuf>) -> Vec<ToolDefinition> {
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
