//! The repeat-call reminder.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::agent_id::AgentId;
use crate::hooks::{PostDecision, PostNext, ToolCallView};
use crate::registry::{Handle, Registry};
use crate::result::{AdditionalContext, ContentBlock, ContextSource, ToolResult};

/// Configuration of [`RepeatCallReminder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReminderConfig {
    /// Consecutive identical calls at which a reminder is added; integers ≥ 2, no duplicates.
    /// Default `[3, 5, 8]`.
    pub thresholds: Vec<u32>,
    /// Tool-name patterns to track (`*` is the only wildcard); empty = track every tool.
    pub include: Vec<String>,
    /// Tool-name patterns never tracked.
    pub exclude: Vec<String>,
    /// Longest argument preview in the detailed reminder, in UTF-16 units. Default 500, ≥ 1.
    pub arguments_preview_chars: usize,
}

impl Default for ReminderConfig {
    fn default() -> Self {
        ReminderConfig {
            thresholds: vec![3, 5, 8],
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: 500,
        }
    }
}

/// A rejected [`ReminderConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReminderConfigError {
    /// `thresholds` is empty.
    #[error("repeat-call reminder: `thresholds` must not be empty")]
    EmptyThresholds,
    /// A threshold below 2.
    #[error(
        "repeat-call reminder: invalid threshold {0} — every threshold must be an integer >= 2"
    )]
    InvalidThreshold(u32),
    /// A repeated threshold.
    #[error("repeat-call reminder: `thresholds` must not contain duplicates")]
    DuplicateThreshold,
    /// `arguments_preview_chars` of 0.
    #[error("repeat-call reminder: invalid arguments_preview_chars 0 — must be an integer >= 1")]
    InvalidPreviewChars,
}

/// An anchored tool-name pattern where `*` matches any run of characters and everything else is
/// literal.
#[derive(Debug, Clone)]
struct Pattern(Option<regex::Regex>);

impl Pattern {
    fn new(pattern: &str) -> Self {
        let body: Vec<String> = pattern.split('*').map(regex::escape).collect();
        // Escaped literals joined by `.*` always compile; `None` (matching nothing) is unreachable.
        Pattern(regex::Regex::new(&format!("^{}$", body.join(".*"))).ok())
    }

    fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|regex| regex.is_match(name))
    }
}

/// Adds a reminder context when an agent repeats the exact same call (same tool, same canonical
/// arguments) a threshold number of times in a row. Advisory only: it never blocks or rewrites.
///
/// Denied calls count (denials pass through post-execute); calls of untracked tools are
/// transparent (they neither count nor break a chain); calls without an agent are ignored. Call
/// [`RepeatCallReminder::reset`] when the user sends a new prompt.
#[derive(Debug, Clone)]
pub struct RepeatCallReminder {
    inner: Arc<ReminderInner>,
}

#[derive(Debug)]
struct ReminderInner {
    thresholds: Vec<u32>,
    include: Vec<Pattern>,
    exclude: Vec<Pattern>,
    preview_chars: usize,
    chains: Mutex<HashMap<AgentId, (String, u32)>>,
}

impl RepeatCallReminder {
    /// Checks the configuration.
    ///
    /// # Errors
    /// [`ReminderConfigError`] for empty, sub-2 or duplicate thresholds and a zero preview length.
    pub fn new(config: ReminderConfig) -> Result<Self, ReminderConfigError> {
        if config.thresholds.is_empty() {
            return Err(ReminderConfigError::EmptyThresholds);
        }
        if let Some(bad) = config.thresholds.iter().find(|threshold| **threshold < 2) {
            return Err(ReminderConfigError::InvalidThreshold(*bad));
        }
        let mut thresholds = config.thresholds.clone();
        thresholds.sort_unstable();
        thresholds.dedup();
        if thresholds.len() != config.thresholds.len() {
            return Err(ReminderConfigError::DuplicateThreshold);
        }
        if config.arguments_preview_chars == 0 {
            return Err(ReminderConfigError::InvalidPreviewChars);
        }
        Ok(RepeatCallReminder {
            inner: Arc::new(ReminderInner {
                thresholds,
                include: config
                    .include
                    .iter()
                    .map(|pattern| Pattern::new(pattern))
                    .collect(),
                exclude: config
                    .exclude
                    .iter()
                    .map(|pattern| Pattern::new(pattern))
                    .collect(),
                preview_chars: config.arguments_preview_chars,
                chains: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Installs the reminder as a global post-execute hook.
    pub fn install(&self, registry: &Registry) -> Handle {
        registry.on_post_execute(self.hook())
    }

    /// The post-execute hook, for installing it in a scope.
    pub fn hook(
        &self,
    ) -> impl Fn(Arc<ToolCallView>, Arc<ToolResult>, PostNext) -> BoxFuture<'static, PostDecision>
    + Send
    + Sync
    + 'static {
        let inner = self.inner.clone();
        move |view: Arc<ToolCallView>,
              _result: Arc<ToolResult>,
              next: PostNext|
              -> BoxFuture<'static, PostDecision> {
            let reminder = inner.observe(&view);
            Box::pin(async move {
                let mut decision = next.run().await;
                if let Some(reminder) = reminder {
                    decision.contexts_mut().insert(0, reminder);
                }
                decision
            })
        }
    }

    /// Forgets `agent`'s chain (a new user prompt starts afresh).
    pub fn reset(&self, agent: &AgentId) {
        self.inner.chains.lock().remove(agent);
    }
}

impl ReminderInner {
    fn tracked(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|pattern| pattern.matches(name)))
            && !self.exclude.iter().any(|pattern| pattern.matches(name))
    }

    fn observe(&self, view: &ToolCallView) -> Option<AdditionalContext> {
        let agent = view.agent.as_ref()?;
        if !self.tracked(&view.name) {
            return None;
        }
        let canonical = crate::json::compact(&view.arguments, true);
        let key = serde_json::to_string(&(&view.name, &canonical)).unwrap_or_default();
        let count = {
            let mut chains = self.chains.lock();
            let entry = chains
                .entry(agent.clone())
                .or_insert_with(|| (String::new(), 0));
            if entry.0 == key {
                entry.1 = entry.1.saturating_add(1);
            } else {
                *entry = (key, 1);
            }
            entry.1
        };
        if !self.thresholds.contains(&count) {
            return None;
        }
        let text = if count == self.thresholds[0] {
            format!(
                "You have now called `{}` {count} times in a row with identical arguments. Read the result you already \
                 have before calling it again; if it did not answer your question, change the arguments or try another \
                 approach rather than repeating the same call.",
                view.name
            )
        } else {
            [
                "Repeated tool call detected:".to_owned(),
                format!("- tool: {}", view.name),
                format!("- consecutive_calls: {count}"),
                format!("- arguments: {}", preview(&canonical, self.preview_chars)),
                "Repeating this exact call is not getting you anywhere, so do not make it again with these arguments. \
                 Look at the latest result, then pick a different action or different arguments — or finish, if you \
                 already have enough to answer."
                    .to_owned(),
            ]
            .join("\n")
        };
        Some(AdditionalContext {
            content: vec![ContentBlock::text(text)],
            source: ContextSource {
                kind: "plugin".to_owned(),
                name: Some("repeat-call-reminder".to_owned()),
                summary: Some(format!("{} \u{d7} {count}", view.name)),
            },
        })
    }
}

/// Head of `text` up to `limit` UTF-16 units, then `… (+N more chars)` with N in UTF-16 units.
fn preview(text: &str, limit: usize) -> String {
    let total: usize = text.encode_utf16().count();
    if total <= limit {
        return text.to_owned();
    }
    let mut used = 0;
    let mut end = 0;
    for (index, ch) in text.char_indices() {
        if used + ch.len_utf16() > limit {
            break;
        }
        used += ch.len_utf16();
        end = index + ch.len_utf8();
    }
    format!("{}\u{2026} (+{} more chars)", &text[..end], total - used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_truncates_with_the_omitted_count() {
        assert_eq!(preview("abcdef", 4), "abcd\u{2026} (+2 more chars)");
        assert_eq!(preview("abc", 4), "abc");
        // A surrogate pair is never split.
        assert_eq!(preview("a\u{1F600}b", 2), "a\u{2026} (+3 more chars)");
    }

    #[test]
    fn patterns_only_know_the_star() {
        assert!(Pattern::new("gr*").matches("grep"));
        assert!(!Pattern::new("pr.be").matches("probe"));
        assert!(Pattern::new("pr.be").matches("pr.be"));
        assert!(!Pattern::new("grep").matches("grep2"));
    }
}
