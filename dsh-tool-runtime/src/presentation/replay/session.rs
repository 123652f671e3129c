//! The log as calls: each call's record assembled from its events, nested under its run, and
//! the page's header and cards drawn from them (a call's kind, title and outline included).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::page::{clock, escape, millis, plural, pretty, seconds};
use super::views::{
    code_view, content_blocks, diff_list, kind_name, locations_list, result_card_name, result_view,
};
use super::{ReplayLimits, durable_note};
use crate::agent_id::AgentId;
use crate::cards::{CallView, ResultView, ToolCallKind};
use crate::events::{LoggedEvent, ToolEvent};
use crate::result::ToolResult;

/// Runs with at most this many sub-calls show them open.
const OPEN_SUB_CALLS: usize = 6;

/// One call, assembled from its `call` and `result` events.
#[derive(Default)]
pub(super) struct Record<'a> {
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

pub(super) enum Entry {
    Call(usize),
    Lost(u64),
    /// What became of a durable run: a replayed call, a divergence, a park, a decision, a
    /// revert.
    Durable(String),
}

pub(super) struct Session<'a> {
    pub(super) records: Vec<Record<'a>>,
    pub(super) top: Vec<Entry>,
    first_ms: Option<u64>,
    limits: ReplayLimits,
    /// Cards drawn so far.
    pub(super) drawn: Cell<usize>,
}

impl<'a> Session<'a> {
    pub(super) fn build(events: &'a [LoggedEvent], limits: ReplayLimits) -> Self {
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

    pub(super) fn header(&self, page: &mut String) {
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

    pub(super) fn card(&self, page: &mut String, index: usize, depth: usize, siblings: usize) {
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
