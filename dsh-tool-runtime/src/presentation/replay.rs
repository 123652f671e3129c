//! The replay page: an event log rendered as one self-contained HTML file.
//!
//! The page needs no network and no external asset: inline CSS and a few lines of JS (expand and
//! collapse every card). Each call is one `<article class="card">` in the order the calls started,
//! with `data-call-id`, `data-tool`, `data-kind` (the call card's [`ToolCallKind`]) and `data-card`
//! (the result card drawn: `read`, `search`, `diff`, `terminal`, `generic`, or `error` for a
//! failure). Code-mode sub-calls are nested, collapsed, inside their `run_code` card.
//!
//! The page is bounded ([`ReplayLimits`]): past a number of cards, a page size or a nesting
//! depth, calls are left out and a notice says how many.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::agent_id::AgentId;
use crate::cards::{CallView, FileDiff, FileLocation, ResultView, SearchShape, ToolCallKind};
use crate::events::{LoggedEvent, ToolEvent};
use crate::result::{ContentBlock, ToolResult};

/// How much of a log one replay page draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayLimits {
    /// Call cards drawn, sub-calls included; the calls after them are left out. Default 2,000.
    pub max_calls: usize,
    /// Page size in bytes after which no further card is started (the card being drawn is
    /// finished, so the page can pass it by one card). Default 64 MiB.
    pub max_page_bytes: usize,
    /// Sub-call nesting drawn: calls nested deeper are left out. Default 16 (code mode nests
    /// one level, a code-mode server inside code mode two or three).
    pub max_depth: usize,
}

impl Default for ReplayLimits {
    fn default() -> Self {
        ReplayLimits {
            max_calls: 2_000,
            max_page_bytes: 64 << 20,
            max_depth: 16,
        }
    }
}

impl ReplayLimits {
    /// These limits with at most `calls` cards drawn.
    pub fn with_max_calls(mut self, calls: usize) -> Self {
        self.max_calls = calls;
        self
    }

    /// These limits with no card started past `bytes` bytes of page.
    pub fn with_max_page_bytes(mut self, bytes: usize) -> Self {
        self.max_page_bytes = bytes;
        self
    }
}

/// Renders an event log (as [`read_log`](crate::events::read_log) returns it) to one HTML page,
/// under the default [`ReplayLimits`] (2,000 cards, 64 MiB); see [`render_html_with`].
pub fn render_html(events: &[LoggedEvent]) -> String {
    render_html_with(events, &ReplayLimits::default())
}

/// Renders an event log to one HTML page, drawing at most what `limits` allow.
///
/// Calls whose result never arrived show as running; events the writer lost show as a notice
/// where they were lost. Calls past the limits are left out, counted in a notice at the end of
/// the page (`<p class="notice" data-left-out="N">`). All text from the log is HTML-escaped.
pub fn render_html_with(events: &[LoggedEvent], limits: &ReplayLimits) -> String {
    let session = Session::build(events, *limits);
    let mut page = String::with_capacity(16 * 1024);
    page.push_str(HEAD);
    session.header(&mut page);
    page.push_str("<main>\n");
    for entry in &session.top {
        match entry {
            Entry::Call(index) => session.card(&mut page, *index, 0, 1),
            Entry::Lost(missed) => {
                let _ = writeln!(
                    page,
                    "<p class=\"notice\">{missed} events were lost here: the log writer fell behind.</p>"
                );
            }
            Entry::Durable(text) => {
                let _ = writeln!(page, "<p class=\"notice durable\">{}</p>", escape(text));
            }
        }
    }
    if session.top.is_empty() {
        page.push_str("<p class=\"notice\">This log holds no tool calls.</p>\n");
    }
    let drawn = session.drawn.get();
    let left_out = session.records.len() - drawn;
    if left_out > 0 {
        let _ = writeln!(
            page,
            "<p class=\"notice\" data-left-out=\"{left_out}\">{left_out} of {} calls are left out: \
             this page draws at most {} calls, {} levels of sub-calls and {} MiB.</p>",
            session.records.len(),
            limits.max_calls,
            limits.max_depth,
            limits.max_page_bytes >> 20,
        );
    }
    page.push_str("</main>\n");
    page.push_str(SCRIPT);
    page.push_str("</body>\n</html>\n");
    page
}

/// The line a durable run's event gets on the page.
fn durable_note(event: &ToolEvent) -> Option<String> {
    let outcome = |is_error: bool| if is_error { "failed" } else { "ok" };
    Some(match event {
        ToolEvent::DurableReplayed {
            run_id,
            seq,
            name,
            is_error,
            outcome_unknown,
            ..
        } => {
            let what = if *outcome_unknown {
                "outcome unknown (OUTCOME_UNKNOWN)"
            } else {
                outcome(*is_error)
            };
            format!("durable run {run_id}: call #{seq} {name} replayed from the journal: {what}")
        }
        ToolEvent::DurableDiverged {
            run_id, message, ..
        } => format!("durable run {run_id}: replay diverged: {message}"),
        ToolEvent::DurableParked {
            run_id,
            seq,
            name,
            reason,
            ..
        } => format!(
            "durable run {run_id}: parked at call #{seq} {name} for approval{}",
            reason
                .as_deref()
                .map(|reason| format!(": {reason}"))
                .unwrap_or_default()
        ),
        ToolEvent::DurableDecided {
            run_id,
            seq,
            name,
            approved,
            reason,
        } => {
            let decision = if *approved { "approved" } else { "denied" };
            format!(
                "durable run {run_id}: call #{seq} {name} {decision}{}",
                reason
                    .as_deref()
                    .map(|reason| format!(": {reason}"))
                    .unwrap_or_default()
            )
        }
        ToolEvent::DurableReverted {
            run_id,
            seq,
            name,
            revert,
            is_error,
        } => format!(
            "durable run {run_id}: call #{seq} {name} reverted by {revert}: {}",
            outcome(*is_error)
        ),
        _ => return None,
    })
}

/// Runs with at most this many sub-calls show them open.
const OPEN_SUB_CALLS: usize = 6;

/// One call, assembled from its `call` and `result` events.
#[derive(Default)]
struct Record<'a> {
    call_id: &'a str,
    name: &'a str,
    parent: Option<&'a str>,
    agent: Option<&'a AgentId>,
    arguments: Option<&'a Value>,
    call_view: Option<&'a CallView>,
    result: Option<&'a ToolResult>,
    result_view: Option<&'a ResultView>,
    started_ms: Option<u64>,
    duration_ms: Option<f64>,
    children: Vec<usize>,
}

enum Entry {
    Call(usize),
    Lost(u64),
    /// What became of a durable run: a replayed call, a divergence, a park, a decision, a
    /// revert.
    Durable(String),
}

struct Session<'a> {
    records: Vec<Record<'a>>,
    top: Vec<Entry>,
    first_ms: Option<u64>,
    limits: ReplayLimits,
    /// Cards drawn so far.
    drawn: Cell<usize>,
}

impl<'a> Session<'a> {
    fn build(events: &'a [LoggedEvent], limits: ReplayLimits) -> Self {
        let mut records: Vec<Record<'a>> = Vec::new();
        // The latest record of each id: an id reused after its result starts a new record.
        let mut by_id: HashMap<&'a str, usize> = HashMap::new();
        let mut order: Vec<Entry> = Vec::new();
        for event in events {
            match event {
                LoggedEvent::Tool(ToolEvent::Call {
                    call_id,
                    name,
                    arguments,
                    agent,
                    parent,
                    view,
                    at_ms,
                    ..
                }) => {
                    let index = records.len();
                    records.push(Record {
                        call_id,
                        name,
                        parent: parent.as_deref(),
                        agent: agent.as_ref(),
                        arguments: Some(arguments),
                        call_view: view.as_ref(),
                        started_ms: Some(*at_ms),
                        ..Record::default()
                    });
                    by_id.insert(call_id, index);
                    order.push(Entry::Call(index));
                }
                LoggedEvent::Tool(ToolEvent::Result {
                    call_id,
                    name,
                    agent,
                    parent,
                    result,
                    view,
                    at_ms,
                    duration_ms,
                    ..
                }) => {
                    let open = by_id
                        .get(call_id.as_str())
                        .copied()
                        .filter(|index| records[*index].result.is_none());
                    let index = match open {
                        Some(index) => index,
                        // Refused before any hook ran: no call event.
                        None => {
                            let index = records.len();
                            records.push(Record {
                                call_id,
                                name,
                                parent: parent.as_deref(),
                                agent: agent.as_ref(),
                                // The result event is published when the call ends.
                                started_ms: Some(
                                    at_ms.saturating_sub(duration_ms.max(0.0).round() as u64),
                                ),
                                ..Record::default()
                            });
                            by_id.insert(call_id, index);
                            order.push(Entry::Call(index));
                            index
                        }
                    };
                    let record = &mut records[index];
                    record.result = Some(result);
                    record.result_view = view.as_ref();
                    record.duration_ms = Some(*duration_ms);
                }
                LoggedEvent::Tool(event) => {
                    if let Some(text) = durable_note(event) {
                        order.push(Entry::Durable(text));
                    }
                }
                LoggedEvent::Lagged { missed } => order.push(Entry::Lost(*missed)),
            }
        }
        // Nest each sub-call under the latest record of its parent that started before it.
        let mut top = Vec::new();
        let mut latest: HashMap<&'a str, usize> = HashMap::new();
        for entry in order {
            match entry {
                Entry::Call(index) => {
                    let parent = records[index]
                        .parent
                        .and_then(|parent| latest.get(parent).copied());
                    latest.insert(records[index].call_id, index);
                    match parent {
                        Some(parent) => records[parent].children.push(index),
                        None => top.push(Entry::Call(index)),
                    }
                }
                lost => top.push(lost),
            }
        }
        let first_ms = records.iter().filter_map(|record| record.started_ms).min();
        Session {
            records,
            top,
            first_ms,
            limits,
            drawn: Cell::new(0),
        }
    }

    fn header(&self, page: &mut String) {
        let calls = self.records.len();
        let failed = self
            .records
            .iter()
            .filter(|record| record.result.is_some_and(ToolResult::is_error))
            .count();
        let top = self
            .top
            .iter()
            .filter(|entry| matches!(entry, Entry::Call(_)))
            .count();
        page.push_str("<header>\n<h1>Tool calls</h1>\n<p class=\"summary\">");
        let _ = write!(
            page,
            "{calls} {} · {top} top-level",
            plural(calls, "call", "calls")
        );
        if failed > 0 {
            let _ = write!(page, " · <span class=\"bad\">{failed} failed</span>");
        }
        if let Some(first) = self.first_ms {
            let _ = write!(page, " · started {} UTC", clock(first));
        }
        page.push_str(
            "</p>\n<div class=\"controls\"><button type=\"button\" data-action=\"expand\">Expand all</button>\
             <button type=\"button\" data-action=\"collapse\">Collapse all</button></div>\n</header>\n",
        );
    }

    fn card(&self, page: &mut String, index: usize, depth: usize, siblings: usize) {
        // A card left out leaves its sub-calls out with it: all are counted as not drawn.
        if self.drawn.get() >= self.limits.max_calls
            || page.len() >= self.limits.max_page_bytes
            || depth >= self.limits.max_depth
        {
            return;
        }
        self.drawn.set(self.drawn.get() + 1);
        let record = &self.records[index];
        let kind = call_kind(record);
        let failure = match record.result {
            Some(ToolResult::Failure { error, .. }) => Some(error),
            _ => None,
        };
        let card = match (record.result, record.result_view) {
            (None, _) => "running",
            (Some(ToolResult::Failure { .. }), _) => "error",
            (Some(_), Some(view)) => result_card_name(view),
            (Some(_), None) => "generic",
        };
        let status = match (record.result, failure) {
            (None, _) => "running",
            (_, Some(_)) => "failed",
            _ => "ok",
        };
        // Top-level calls, failures and the sub-calls of small runs start open; a run with many
        // sub-calls lists them one line each until opened.
        let open = depth == 0 || failure.is_some() || siblings <= OPEN_SUB_CALLS;
        let _ = write!(
            page,
            "<article class=\"card {status}\" data-call-id=\"{}\" data-tool=\"{}\" data-kind=\"{}\" data-card=\"{card}\">\n<details{}>\n<summary>",
            escape(record.call_id),
            escape(record.name),
            kind_name(kind),
            if open { " open" } else { "" },
        );
        // A tool with no call view declared no kind: it gets no badge rather than a guessed
        // `other`, and its name, which is then its title, is shown once.
        if record.call_view.is_some() {
            let _ = write!(
                page,
                "<span class=\"badge k-{0}\">{0}</span>",
                kind_name(kind)
            );
        }
        let title = call_title(record);
        let _ = write!(page, "<span class=\"title\">{}</span>", escape(&title));
        if title != record.name {
            let _ = write!(page, "<span class=\"tool\">{}</span>", escape(record.name));
        }
        if let Some(outline) = outline(record) {
            let _ = write!(page, "<span class=\"outline\">{}</span>", escape(&outline));
        }
        if let Some(agent) = record.agent {
            let _ = write!(
                page,
                "<span class=\"agent\">{}</span>",
                escape(agent.as_str())
            );
        }
        let mark = match status {
            "ok" => "<span class=\"status ok\" title=\"succeeded\">✓</span>",
            "failed" => "<span class=\"status failed\" title=\"failed\">✗ failed</span>",
            _ => "<span class=\"status running\" title=\"no result logged\">… running</span>",
        };
        page.push_str(mark);
        page.push_str("<span class=\"time\">");
        if let (Some(started), Some(first)) = (record.started_ms, self.first_ms) {
            let _ = write!(
                page,
                "<span class=\"at\">+{}</span>",
                seconds(started.saturating_sub(first) as f64)
            );
        }
        if let Some(duration) = record.duration_ms {
            let _ = write!(page, "<span class=\"took\">{}</span>", millis(duration));
        }
        page.push_str("</span></summary>\n<div class=\"body\">\n");
        self.call_body(page, record);
        if !record.children.is_empty() {
            let _ = writeln!(
                page,
                "<section class=\"children\"><h3>{} {}</h3>",
                record.children.len(),
                plural(record.children.len(), "sub-call", "sub-calls")
            );
            for child in &record.children {
                self.card(page, *child, depth + 1, record.children.len());
            }
            page.push_str("</section>\n");
        }
        match record.result {
            Some(ToolResult::Failure { error, .. }) => {
                page.push_str("<div class=\"failure\">");
                if let Some(info) = &error.info {
                    let _ = write!(page, "<span class=\"code\">{}</span>", escape(&info.code));
                }
                let _ = writeln!(page, "<pre>{}</pre></div>", escape(&error.message));
            }
            Some(ToolResult::Success { content, .. }) => match record.result_view {
                Some(view) => result_view(page, view),
                None => content_blocks(page, content),
            },
            None => {}
        }
        if let Some(arguments) = record.arguments {
            // The arguments of a failed call are often why it failed (`INVALID_ARGS`).
            let _ = writeln!(
                page,
                "<details class=\"raw\"{}><summary>arguments</summary><pre>{}</pre></details>",
                if failure.is_some() { " open" } else { "" },
                escape(&pretty(arguments))
            );
        }
        page.push_str("</div>\n</details>\n</article>\n");
    }

    /// What the pending-state card adds below the summary line.
    fn call_body(&self, page: &mut String, record: &Record<'_>) {
        match record.call_view {
            Some(CallView::Generic {
                raw_input,
                content,
                locations,
                ..
            }) => {
                locations_list(page, locations);
                if let Some(raw) = raw_input {
                    match raw {
                        Value::String(text) => {
                            page.push_str("<div class=\"input\">");
                            code_view(page, text.lines().zip(1..).map(|(t, n)| (n, t, false)));
                            page.push_str("</div>\n");
                        }
                        other => {
                            let _ = writeln!(
                                page,
                                "<pre class=\"input\">{}</pre>",
                                escape(&pretty(other))
                            );
                        }
                    }
                }
                content_blocks(page, content);
            }
            Some(CallView::Terminal {
                title,
                description,
                cwd,
                ..
            }) => {
                if let Some(description) = description {
                    let _ = writeln!(page, "<p class=\"description\">{}</p>", escape(description));
                }
                page.push_str("<pre class=\"terminal\">");
                if let Some(cwd) = cwd {
                    let _ = write!(page, "<span class=\"cwd\">{}</span>", escape(cwd));
                }
                let _ = writeln!(
                    page,
                    "<span class=\"prompt\">$ </span>{}</pre>",
                    escape(title)
                );
            }
            Some(CallView::Diff {
                diffs, locations, ..
            }) => {
                locations_list(page, locations);
                diff_list(page, diffs);
            }
            None => {}
        }
    }
}

fn result_view(page: &mut String, view: &ResultView) {
    match view {
        ResultView::Generic { title, content } => {
            if let Some(title) = title {
                let _ = writeln!(page, "<p class=\"result-title\">{}</p>", escape(title));
            }
            content_blocks(page, content);
        }
        ResultView::Terminal {
            output,
            exit_code,
            signal,
            ..
        } => {
            let _ = writeln!(
                page,
                "<pre class=\"terminal\">{}</pre>",
                escape(output.as_deref().unwrap_or(""))
            );
            match (exit_code, signal) {
                (Some(code), _) => {
                    let class = if *code == 0 { "ok" } else { "bad" };
                    let _ = writeln!(page, "<p class=\"exit {class}\">exit code {code}</p>");
                }
                (None, Some(signal)) => {
                    let _ = writeln!(
                        page,
                        "<p class=\"exit bad\">killed by {}</p>",
                        escape(signal)
                    );
                }
                (None, None) => {}
            }
        }
        ResultView::Diff { diffs, .. } => diff_list(page, diffs),
        ResultView::Search {
            shape,
            truncated,
            total,
            ..
        } => {
            match shape {
                SearchShape::Matches { files } => {
                    for file in files {
                        let _ = write!(
                            page,
                            "<div class=\"file\"><div class=\"path\">{}</div>",
                            escape(&file.path)
                        );
                        code_view(
                            page,
                            file.matches
                                .iter()
                                .map(|hit| (hit.line_number, hit.line.as_str(), true)),
                        );
                        page.push_str("</div>\n");
                    }
                }
                SearchShape::Paths { paths } => {
                    page.push_str("<ul class=\"paths\">");
                    for path in paths {
                        let _ = write!(page, "<li>{}</li>", escape(path));
                    }
                    page.push_str("</ul>\n");
                }
            }
            let shown = match shape {
                SearchShape::Matches { files } => files.iter().map(|f| f.matches.len()).sum(),
                SearchShape::Paths { paths } => paths.len(),
            };
            let _ = write!(page, "<p class=\"foot\">{shown} shown of {total}");
            if *truncated {
                page.push_str(" · <span class=\"bad\">truncated</span>");
            }
            page.push_str("</p>\n");
        }
        ResultView::Read {
            path,
            offset,
            lines,
            total_lines,
            lang,
            ..
        } => {
            let _ = write!(
                page,
                "<div class=\"file\"><div class=\"path\">{}",
                escape(path)
            );
            let range = match (lines.first(), lines.last()) {
                (Some(first), Some(last)) => {
                    format!("lines {}–{} of {total_lines}", first.number, last.number)
                }
                _ => format!("no lines at {offset} of {total_lines}"),
            };
            let _ = write!(page, "<span class=\"range\">{range}</span>");
            if let Some(lang) = lang {
                let _ = write!(page, "<span class=\"lang\">{}</span>", escape(lang));
            }
            page.push_str("</div>");
            code_view(
                page,
                lines
                    .iter()
                    .map(|line| (line.number, line.text.as_str(), false)),
            );
            page.push_str("</div>\n");
        }
    }
}

/// A code view: line numbers in a gutter, hit lines highlighted, a gap marked between
/// non-consecutive lines.
fn code_view<'t>(page: &mut String, lines: impl Iterator<Item = (u64, &'t str, bool)>) {
    page.push_str("<table class=\"code\"><tbody>");
    let mut previous: Option<u64> = None;
    for (number, text, hit) in lines {
        if previous.is_some_and(|previous| number > previous + 1) {
            page.push_str("<tr class=\"gap\"><td class=\"ln\">⋯</td><td></td></tr>");
        }
        previous = Some(number);
        let _ = write!(
            page,
            "<tr{}><td class=\"ln\">{number}</td><td class=\"src\">{}</td></tr>",
            if hit { " class=\"hit\"" } else { "" },
            escape(text)
        );
    }
    page.push_str("</tbody></table>");
}

fn diff_list(page: &mut String, diffs: &[FileDiff]) {
    for diff in diffs {
        let label = if diff.old_text.is_none() {
            " (new file)"
        } else {
            ""
        };
        let _ = write!(
            page,
            "<div class=\"file\"><div class=\"path\">{}{label}</div><table class=\"code diff\"><tbody>",
            escape(&diff.path)
        );
        let old = diff.old_text.as_deref().unwrap_or("");
        let text_diff = similar::TextDiff::from_lines(old, &diff.new_text);
        for (index, group) in text_diff.grouped_ops(3).iter().enumerate() {
            if index > 0 {
                page.push_str("<tr class=\"gap\"><td class=\"ln\">⋯</td><td class=\"ln\">⋯</td><td></td></tr>");
            }
            for op in group {
                for change in text_diff.iter_changes(op) {
                    let (class, sign) = match change.tag() {
                        similar::ChangeTag::Delete => ("del", '-'),
                        similar::ChangeTag::Insert => ("add", '+'),
                        similar::ChangeTag::Equal => ("ctx", ' '),
                    };
                    let number =
                        |n: Option<usize>| n.map(|n| (n + 1).to_string()).unwrap_or_default();
                    let text = change.value();
                    let _ = write!(
                        page,
                        "<tr class=\"{class}\"><td class=\"ln\">{}</td><td class=\"ln\">{}</td><td class=\"src\">{sign} {}</td></tr>",
                        number(change.old_index()),
                        number(change.new_index()),
                        escape(text.strip_suffix('\n').unwrap_or(text))
                    );
                }
            }
        }
        page.push_str("</tbody></table></div>\n");
    }
}

fn locations_list(page: &mut String, locations: &[FileLocation]) {
    if locations.is_empty() {
        return;
    }
    page.push_str("<ul class=\"locations\">");
    for location in locations {
        let _ = match location.line {
            Some(line) => write!(page, "<li>{}:{line}</li>", escape(&location.path)),
            None => write!(page, "<li>{}</li>", escape(&location.path)),
        };
    }
    page.push_str("</ul>\n");
}

fn content_blocks(page: &mut String, content: &[ContentBlock]) {
    for block in content {
        match block {
            ContentBlock::Text { text } => {
                let _ = writeln!(page, "<pre class=\"content\">{}</pre>", escape(text));
            }
            ContentBlock::Image { media_type, data } => {
                // Only well-formed base64 of an image type goes into the `src` attribute.
                let safe = media_type.starts_with("image/")
                    && media_type[6..]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
                    && data
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                if safe {
                    let _ = writeln!(
                        page,
                        "<img class=\"content\" alt=\"image result\" src=\"data:{media_type};base64,{data}\">"
                    );
                } else {
                    page.push_str(
                        "<p class=\"notice\">An image that is not valid base64 was left out.</p>\n",
                    );
                }
            }
            // Sound and binary resources are named, not embedded: the page stays text and images.
            ContentBlock::Audio { media_type, .. } => {
                let _ = writeln!(
                    page,
                    "<p class=\"notice\">An audio clip ({}) was left out.</p>",
                    escape(media_type)
                );
            }
            ContentBlock::Resource { uri, contents, .. } => {
                let _ = writeln!(page, "<p class=\"notice\">Resource {}</p>", escape(uri));
                if let crate::result::ResourceContents::Text(text) = contents {
                    let _ = writeln!(page, "<pre class=\"content\">{}</pre>", escape(text));
                }
            }
        }
    }
}

fn call_kind(record: &Record<'_>) -> ToolCallKind {
    match record.call_view {
        Some(CallView::Generic { kind, .. }) => *kind,
        Some(CallView::Terminal { .. }) => ToolCallKind::Execute,
        Some(CallView::Diff { .. }) => ToolCallKind::Edit,
        None => ToolCallKind::Other,
    }
}

fn call_title(record: &Record<'_>) -> String {
    match record.call_view {
        Some(
            CallView::Generic { title, .. }
            | CallView::Terminal { title, .. }
            | CallView::Diff { title, .. },
        ) => title.clone(),
        None => record.name.to_owned(),
    }
}

/// A short account of the result for the summary line, readable while the card is closed.
fn outline(record: &Record<'_>) -> Option<String> {
    if let Some(ToolResult::Failure { error, .. }) = record.result {
        let first = error.message.lines().next().unwrap_or_default();
        let mut text: String = first.chars().take(120).collect();
        if text.len() < first.len() {
            text.push('…');
        }
        return Some(text);
    }
    let view = record.result_view?;
    Some(match view {
        ResultView::Read {
            lines, total_lines, ..
        } => {
            format!("{} of {total_lines} lines", lines.len())
        }
        ResultView::Search {
            title: Some(title), ..
        }
        | ResultView::Generic {
            title: Some(title), ..
        }
        | ResultView::Terminal {
            title: Some(title), ..
        }
        | ResultView::Diff {
            title: Some(title), ..
        } => title.clone(),
        ResultView::Search { total, .. } => format!("{total} results"),
        ResultView::Diff { diffs, .. } => format!("{} files changed", diffs.len()),
        ResultView::Terminal {
            exit_code: Some(code),
            ..
        } => format!("exit {code}"),
        _ => return None,
    })
}

fn result_card_name(view: &ResultView) -> &'static str {
    match view {
        ResultView::Generic { .. } => "generic",
        ResultView::Terminal { .. } => "terminal",
        ResultView::Diff { .. } => "diff",
        ResultView::Search { .. } => "search",
        ResultView::Read { .. } => "read",
    }
}

fn kind_name(kind: ToolCallKind) -> &'static str {
    match kind {
        ToolCallKind::Read => "read",
        ToolCallKind::Edit => "edit",
        ToolCallKind::Delete => "delete",
        ToolCallKind::Move => "move",
        ToolCallKind::Search => "search",
        ToolCallKind::Execute => "execute",
        ToolCallKind::Fetch => "fetch",
        ToolCallKind::Other => "other",
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn plural<'s>(n: usize, one: &'s str, many: &'s str) -> &'s str {
    if n == 1 { one } else { many }
}

fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        seconds(ms)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn seconds(ms: f64) -> String {
    format!("{:.2} s", ms / 1000.0)
}

/// `HH:MM:SS` of a Unix time in ms.
fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// Escapes text for HTML element content and double-quoted attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>Tool calls · replay</title>
<style>
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#f6f8fa; --card:#fff; --ok:#1a7f37; --bad:#cf222e; --hit:#fff8c5; --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--line); padding: 10px 24px; display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
h1 { font-size: 18px; margin: 0; }
.summary { margin: 0; color: var(--muted); }
.controls { margin-left: auto; display: flex; gap: 6px; }
button { font: inherit; font-size: 12px; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); cursor: pointer; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 4px solid #8c959f; border-radius: 8px; margin: 0 0 10px; }
.card.failed { border-left-color: var(--bad); background: #fffafa; }
.card[data-kind="read"] { border-left-color: #0969da; }
.card[data-kind="search"] { border-left-color: #8250df; }
.card[data-kind="execute"] { border-left-color: #bf8700; }
.card[data-kind="edit"] { border-left-color: #1a7f37; }
.card.failed[data-kind] { border-left-color: var(--bad); }
summary { list-style: none; cursor: pointer; display: flex; align-items: center; gap: 8px; padding: 7px 12px; min-width: 0; }
summary::-webkit-details-marker { display: none; }
summary::before { content: "▸"; color: var(--muted); width: 10px; flex: none; }
details[open] > summary::before { content: "▾"; }
.badge { flex: none; font-size: 10px; font-weight: 600; text-transform: uppercase; letter-spacing: .04em; padding: 1px 6px; border-radius: 10px; background: #eaeef2; color: #424a53; }
.k-read { background: #ddf4ff; color: #0550ae; } .k-search { background: #fbefff; color: #6639ba; } .k-execute { background: #fff8c5; color: #7d4e00; } .k-edit { background: #dafbe1; color: #116329; }
.title { font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0; }
.tool { flex: none; font-family: var(--mono); font-size: 12px; color: var(--muted); }
.outline { color: var(--muted); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0; flex: 1; }
.failed .outline { color: var(--bad); }
.agent { flex: none; font-size: 11px; padding: 0 6px; border: 1px solid var(--line); border-radius: 10px; }
.status { flex: none; font-weight: 600; }
.status.ok { color: var(--ok); } .status.failed { color: var(--bad); } .status.running { color: var(--muted); }
.time { flex: none; margin-left: auto; font-family: var(--mono); font-size: 12px; color: var(--muted); display: flex; gap: 10px; }
.at, .took { min-width: 58px; text-align: right; }
.body { padding: 0 12px 10px 30px; min-width: 0; overflow-wrap: anywhere; }
.body > * { margin-top: 8px; }
.file { border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
.file + .file { margin-top: 8px; }
.path { font-family: var(--mono); font-size: 12px; background: var(--bg); border-bottom: 1px solid var(--line); padding: 4px 10px; display: flex; gap: 12px; }
.range, .lang { color: var(--muted); } .lang { margin-left: auto; }
table.code { border-collapse: collapse; width: 100%; font: 12px/1.5 var(--mono); display: block; max-height: 360px; overflow: auto; }
table.code tbody { display: table; width: 100%; }
.input table.code { border: 1px solid var(--line); border-radius: 6px; max-height: 260px; }
td.ln { width: 1%; padding: 0 10px; text-align: right; color: #8c959f; user-select: none; white-space: nowrap; vertical-align: top; border-right: 1px solid var(--line); }
td.src { padding: 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
tr.hit td { background: var(--hit); } tr.hit td.ln { color: #7d4e00; font-weight: 600; box-shadow: inset 3px 0 #d4a72c; }
tr.gap td { background: var(--bg); color: var(--muted); text-align: center; }
tr.add td { background: #e6ffec; } tr.del td { background: #ffebe9; }
pre { margin: 0; font: 12px/1.5 var(--mono); white-space: pre-wrap; word-break: break-word; }
pre.content, pre.input { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; max-height: 360px; overflow: auto; }
pre.terminal { background: #1f2328; color: #e6edf3; border-radius: 6px; padding: 8px 12px; max-height: 360px; overflow: auto; }
.prompt { color: #7ee787; } .cwd { color: #8b949e; margin-right: 8px; }
.exit { font-family: var(--mono); font-size: 12px; margin: 4px 0 0; } .exit.ok { color: var(--ok); }
.bad { color: var(--bad); }
.failure { border: 1px solid #ffcecb; background: #ffebe9; border-radius: 6px; padding: 6px 10px; color: #82071e; }
.failure .code { display: inline-block; font: 600 11px var(--mono); background: var(--bad); color: #fff; border-radius: 4px; padding: 0 6px; margin-bottom: 4px; }
ul.paths { margin: 0; padding: 6px 10px; list-style: none; font: 12px/1.6 var(--mono); border: 1px solid var(--line); border-radius: 6px; max-height: 240px; overflow: auto; columns: 2; }
ul.locations { margin: 0; padding: 0; list-style: none; display: flex; flex-wrap: wrap; gap: 6px; }
ul.locations li { font: 12px var(--mono); background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: 0 6px; }
.foot { margin: 4px 0 0; font-size: 12px; color: var(--muted); }
.result-title, .description { margin: 0; color: var(--muted); }
.children { border-left: 2px solid var(--line); padding-left: 10px; }
.children h3 { font-size: 12px; font-weight: 600; color: var(--muted); margin: 4px 0 6px; text-transform: uppercase; letter-spacing: .04em; }
.children .card { margin-bottom: 4px; }
.children summary { padding: 4px 10px; }
details.raw > summary { padding: 0; font-size: 12px; color: var(--muted); }
details.raw pre { margin-top: 4px; background: var(--bg); border-radius: 6px; padding: 6px 10px; max-height: 240px; overflow: auto; }
.notice { color: var(--muted); font-style: italic; }
img.content { max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
</style>
</head>
<body>
"#;

const SCRIPT: &str = r#"<script>
document.querySelector(".controls").addEventListener("click", (event) => {
  const action = event.target.getAttribute("data-action");
  if (!action) return;
  for (const details of document.querySelectorAll("article.card > details")) {
    details.open = action === "expand";
  }
});
</script>
"#;
