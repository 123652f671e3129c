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

mod page;
mod session;
mod views;

use std::fmt::Write as _;

use crate::events::{LoggedEvent, ToolEvent};
use page::{HEAD, SCRIPT, escape};
use session::{Entry, Session};

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
