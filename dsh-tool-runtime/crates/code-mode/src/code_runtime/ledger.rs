//! The output ledger: exact JSON byte accounting of what a run hands back.

use serde_json::Value;

use super::{CodeRunFailure, FailureKind, JsonText, RunOutcome};

/// Counts the bytes of a run's output as the JSON the caller will serialize: the logs array
/// (`[]` is 2 bytes, each entry its quoted and escaped UTF-8 string, plus 1 per separating
/// comma) plus the completion value or the failure message string. The total may not exceed
/// the cap (`max_output_bytes`).
///
/// Strings are counted as `serde_json` writes them: `"` and `\` and the control characters
/// `\b \f \n \r \t` take 2 bytes, other control characters 6 (`\u00XX`), everything else its
/// UTF-8 length. Numbers take the length of their `serde_json` rendering.
///
/// Boundary examples: with a cap of 7, returning `"€"` fits (2 + 5 bytes) and a cap of 6 does not;
/// with a cap of 11, one log `"abc"` plus the value `"xy"` fits (7 + 4).
#[derive(Debug, Clone)]
pub struct OutputLedger {
    cap: u64,
    used: u64,
    entries: usize,
}

impl OutputLedger {
    /// An empty ledger (the logs array `[]` already counts 2 bytes) with this cap in bytes.
    pub fn new(cap: u64) -> Self {
        OutputLedger {
            cap,
            used: 2,
            entries: 0,
        }
    }

    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The fixed diagnostic of an output overflow: `outer output exceeded <cap> bytes`.
    pub fn diagnostic(&self) -> String {
        format!("outer output exceeded {} bytes", self.cap)
    }

    /// Appends `text` to `logs` if it fits.
    ///
    /// # Errors
    ///
    /// When it does not fit, the run is over: `logs` keeps every earlier entry plus the longest
    /// code-point-aligned prefix of `text` (if non-empty) that fits together with the diagnostic,
    /// and the returned message is the diagnostic, itself cut to what is left (see
    /// [`overflow_message`](Self::overflow_message) for the one case where a kept entry gives way).
    pub fn push_log(&mut self, logs: &mut Vec<String>, text: &str) -> Result<(), String> {
        let cost = self.separator() + json_str_len(text);
        if self.used + cost <= self.cap {
            logs.push(text.to_owned());
            self.used += cost;
            self.entries += 1;
            return Ok(());
        }
        Err(self.overflow(logs, Some(text)))
    }

    /// Whether `value` fits as the completion value after the logs charged so far.
    pub fn fits_value(&self, value: &Value) -> bool {
        self.used.saturating_add(json_len(value)) <= self.cap
    }

    /// Whether `value`, compact JSON text, fits as the completion value after the logs charged
    /// so far: its text is exactly the bytes [`fits_value`](Self::fits_value) counts.
    pub fn fits_text(&self, value: &JsonText) -> bool {
        self.used.saturating_add(value.as_str().len() as u64) <= self.cap
    }

    /// Checks a failure message against the remaining budget.
    ///
    /// # Errors
    ///
    /// When it does not fit, the overflow diagnostic (cut to fit, as in
    /// [`overflow_message`](Self::overflow_message)) to report as `output-limit`.
    pub fn check_message(&mut self, logs: &mut Vec<String>, message: &str) -> Result<(), String> {
        if self.used + json_str_len(message) <= self.cap {
            Ok(())
        } else {
            Err(self.overflow(logs, None))
        }
    }

    /// Ends the ledger with an overflow that no single entry caused (e.g. an oversized value).
    ///
    /// The returned diagnostic is cut to the bytes the kept logs leave, so logs plus message
    /// never pass the cap. The message is a JSON string and costs at least 2 bytes (`""`):
    /// when the logs leave 0 or 1 bytes, the last kept entry is dropped from `logs` to make
    /// room, the only case in which an overflow takes back an entry that fitted (with a cap of
    /// 7 and three empty lines, the run keeps `[""]`, 4 bytes, and the message `"o"`, 3). A cap
    /// below 4 ([`Budgets`](super::Budgets) refuses one) leaves no room for any message.
    pub fn overflow_message(&mut self, logs: &mut Vec<String>) -> String {
        self.overflow(logs, None)
    }

    fn separator(&self) -> u64 {
        u64::from(self.entries > 0)
    }

    fn overflow(&mut self, logs: &mut Vec<String>, partial: Option<&str>) -> String {
        let diagnostic = self.diagnostic();
        let diagnostic_cost = json_str_len(&diagnostic);
        if let Some(text) = partial {
            let fixed = self.used + self.separator() + diagnostic_cost;
            if let Some(budget) = self.cap.checked_sub(fixed) {
                let prefix = longest_prefix(text, budget);
                if !prefix.is_empty() {
                    self.used += self.separator() + json_str_len(prefix);
                    self.entries += 1;
                    logs.push(prefix.to_owned());
                }
            }
        }
        // Even an empty message costs its 2 quotes. When the kept logs leave less than that, the
        // last of them gives way: it takes at least 2 bytes, so the message then fits.
        if self.cap.saturating_sub(self.used) < 2
            && self.entries > 0
            && let Some(last) = logs.pop()
        {
            self.entries -= 1;
            self.used -= self.separator() + json_str_len(&last);
        }
        let left = self.cap.saturating_sub(self.used);
        let message = longest_prefix(&diagnostic, left).to_owned();
        self.used += json_str_len(&message);
        message
    }
}

/// The longest code-point-aligned prefix of `text` whose JSON string form takes at most
/// `budget` bytes (empty when even `""` does not fit).
pub fn longest_prefix(text: &str, budget: u64) -> &str {
    let mut used = 2;
    for (i, c) in text.char_indices() {
        used += char_cost(c);
        if used > budget {
            return &text[..i];
        }
    }
    if used > budget { "" } else { text }
}

fn char_cost(c: char) -> u64 {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8() as u64,
    }
}

/// The byte length of `s` as a JSON string literal written by `serde_json`, quotes included.
pub fn json_str_len(s: &str) -> u64 {
    // ASCII without escapes is the common case; count it without decoding chars.
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            b if b < 0x20 => 6,
            _ => 1,
        })
        .sum::<u64>()
}

/// The byte length of `value` as compact JSON written by `serde_json`, computed without
/// recursion or allocation of the text.
pub(crate) fn json_len(value: &Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total += match v {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => n.to_string().len() as u64,
            Value::String(s) => json_str_len(s),
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len().saturating_sub(1) as u64
            }
            Value::Object(map) => {
                stack.extend(map.values());
                let keys: u64 = map.keys().map(|k| json_str_len(k) + 1).sum();
                2 + keys + map.len().saturating_sub(1) as u64
            }
        };
    }
    total
}

/// The outcome of a failed run, its message charged to the ledger like any output: a message that
/// no longer fits turns the failure into an `output-limit` one.
pub(crate) fn failure_outcome(
    ledger: &mut OutputLedger,
    mut logs: Vec<String>,
    kind: FailureKind,
    message: String,
) -> RunOutcome {
    let error = match ledger.check_message(&mut logs, &message) {
        Ok(()) => CodeRunFailure { kind, message },
        Err(diagnostic) => CodeRunFailure {
            kind: FailureKind::OutputLimit,
            message: diagnostic,
        },
    };
    RunOutcome {
        value: None,
        logs,
        error: Some(error),
        sandbox: None,
    }
}

/// Splits a raw output stream (a process's stdout or stderr) into log entries, one per line; a
/// line longer than `max` bytes is cut there, so a stream with no newline holds at most `max`
/// bytes of the host's memory.
#[derive(Debug)]
pub struct Lines {
    line: Vec<u8>,
    max: usize,
}

impl Lines {
    /// A splitter cutting lines at `max` bytes.
    pub fn new(max: usize) -> Self {
        Lines {
            line: Vec::new(),
            max,
        }
    }

    /// Appends the entries `bytes` completes to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
            let (body, complete) = match chunk.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (chunk, false),
            };
            let mut body = body;
            while self.line.len() + body.len() > self.max {
                let room = self.max - self.line.len();
                self.line.extend_from_slice(&body[..room]);
                body = &body[room..];
                out.push(self.take());
            }
            self.line.extend_from_slice(body);
            if complete {
                out.push(self.take());
            }
        }
    }

    /// The final unterminated line, if there is one.
    pub fn finish(&mut self) -> Option<String> {
        (!self.line.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lengths_match_serde_json() {
        let samples = [
            json!(null),
            json!(true),
            json!(false),
            json!(-12.5e-7),
            json!(1e21),
            json!(18446744073709551615u64),
            json!("a\"b\\c\n\u{1}\u{7f}€😀"),
            json!([]),
            json!({}),
            json!([1, [2, {"k": [null, "x"]}], {"a": {}, "b\n": []}]),
        ];
        for v in samples {
            assert_eq!(
                json_len(&v),
                serde_json::to_string(&v).unwrap().len() as u64,
                "{v}"
            );
        }
    }

    #[test]
    fn exact_boundaries() {
        assert!(OutputLedger::new(7).fits_value(&json!("€")));
        assert!(!OutputLedger::new(6).fits_value(&json!("€")));
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(11);
        l.push_log(&mut logs, "abc").unwrap();
        assert!(l.fits_value(&json!("xy")));
        let mut l = OutputLedger::new(10);
        l.push_log(&mut logs, "abc").unwrap();
        assert!(!l.fits_value(&json!("xy")));
    }

    #[test]
    fn overflow_keeps_a_prefix_and_the_diagnostic() {
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(60);
        l.push_log(&mut logs, "first").unwrap();
        let message = l.push_log(&mut logs, &"€".repeat(100)).unwrap_err();
        assert_eq!(message, "outer output exceeded 60 bytes");
        // 2 + 7 ("first") + 1 (comma) + 32 (diagnostic) leaves 18: quotes + five 3-byte chars
        // (17); a sixth would need 20.
        assert_eq!(logs, vec!["first".to_owned(), "€".repeat(5)]);
        assert_eq!(l.used(), 59);
    }

    #[test]
    fn overflow_cuts_the_diagnostic_when_nothing_else_fits() {
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(12);
        let message = l.check_message(&mut logs, &"x".repeat(100)).unwrap_err();
        // 12 - 2 leaves 10 bytes: the quotes and 8 characters.
        assert_eq!(message, "outer ou");
        assert!(logs.is_empty());
    }

    /// Logs plus message as the caller serializes them.
    fn charged(logs: &[String], message: &str) -> usize {
        serde_json::to_string(logs).unwrap().len() + serde_json::to_string(message).unwrap().len()
    }

    #[test]
    fn the_last_log_gives_way_when_even_an_empty_message_cannot_fit() {
        // Cap 7: `["",""]` takes all 7 bytes; the message needs 2 more, so one entry goes and
        // the 3 bytes it frees take `"o"`.
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(7);
        l.push_log(&mut logs, "").unwrap();
        l.push_log(&mut logs, "").unwrap();
        let message = l.push_log(&mut logs, "").unwrap_err();
        assert_eq!(
            (logs.as_slice(), message.as_str()),
            (&[String::new()][..], "o")
        );
        assert_eq!(charged(&logs, &message) as u64, l.used());
        assert_eq!(l.used(), 7);
        // Cap 8: 1 byte left after `["",""]`; the entry and its comma free 3, for `"ou"`.
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(8);
        l.push_log(&mut logs, "").unwrap();
        l.push_log(&mut logs, "").unwrap();
        let message = l.overflow_message(&mut logs);
        assert_eq!((logs.len(), message.as_str()), (1, "ou"));
        assert_eq!(charged(&logs, &message), 8);
        // With 2 bytes left nothing gives way: the message is `""`.
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(9);
        l.push_log(&mut logs, "").unwrap();
        l.push_log(&mut logs, "").unwrap();
        let message = l.check_message(&mut logs, "boom").unwrap_err();
        assert_eq!((logs.len(), message.as_str()), (2, ""));
        assert_eq!(charged(&logs, &message), 9);
    }

    #[test]
    fn empty_logs_filling_eight_mib_leave_room_for_the_message() {
        let cap = 8 << 20;
        let mut logs = Vec::new();
        let mut l = OutputLedger::new(cap);
        let message = loop {
            if let Err(message) = l.push_log(&mut logs, "") {
                break message;
            }
        };
        assert_eq!(charged(&logs, &message) as u64, l.used());
        assert!(l.used() <= cap, "{} bytes for a cap of {cap}", l.used());
    }

    #[test]
    fn output_lines_are_cut_at_their_cap() {
        let mut lines = Lines::new(4);
        let mut out = Vec::new();
        lines.feed(b"ab\ncdefghij", &mut out);
        assert_eq!(out, ["ab", "cdef"]);
        lines.feed(b"k\nl", &mut out);
        assert_eq!(out, ["ab", "cdef", "ghij", "k"]);
        assert_eq!(lines.finish().as_deref(), Some("l"));
        assert_eq!(lines.finish(), None);
    }
}
