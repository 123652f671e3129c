//! [`FrameDecoder`]: the child's protocol stream cut into lines, each buffered only up to its
//! bound (tighter for call frames), an oversized one reduced to the prefix that says what it
//! was.

use super::{Inbound, MAX_CALL_ID, decode_child_frame};

/// How much of an oversized frame is kept to recognise what it was (and a call's id).
const OVERSIZE_PREFIX: usize = 48;

/// How the bootstrap starts every call frame.
const CALL_PREFIX: &[u8] = br#"{"type":"call","id":"#;

/// Splits the child's protocol stream into frames and decodes them.
///
/// Feed it bytes in any chunking with [`feed`](Self::feed); each complete line is decoded with
/// [`decode_child_frame`]. A line longer than `max_frame_bytes` is never buffered beyond that
/// bound: the rest of it is skipped up to the next newline.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
    max_call_bytes: usize,
    line: Vec<u8>,
    oversize: Option<Vec<u8>>,
}

impl FrameDecoder {
    /// A decoder whose frames may be at most `max_frame_bytes` long (newline excluded).
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder {
            max_frame_bytes,
            max_call_bytes: max_frame_bytes,
            line: Vec::new(),
            oversize: None,
        }
    }

    /// Bounds call frames more tightly: a line that starts as a call frame
    /// (`{"type":"call","id":`) is not buffered past `max_call_bytes`; it yields
    /// [`Inbound::OversizedCall`].
    pub fn with_call_limit(mut self, max_call_bytes: usize) -> Self {
        self.max_call_bytes = max_call_bytes.min(self.max_frame_bytes);
        self
    }

    fn limit(&self) -> usize {
        if self.line.starts_with(CALL_PREFIX) {
            self.max_call_bytes
        } else {
            self.max_frame_bytes
        }
    }

    /// Decodes every line `bytes` completes, appending the results to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Inbound>) {
        while !bytes.is_empty() {
            let (chunk, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.oversize.is_none() {
                // The call limit applies once the line is long enough to show its prefix.
                let head = CALL_PREFIX
                    .len()
                    .saturating_sub(self.line.len())
                    .min(chunk.len());
                self.line.extend_from_slice(&chunk[..head]);
                let chunk = &chunk[head..];
                let limit = self.limit();
                if self.line.len() + chunk.len() <= limit {
                    grow(&mut self.line, chunk.len(), limit);
                    self.line.extend_from_slice(chunk);
                } else {
                    let mut prefix = std::mem::take(&mut self.line);
                    prefix.extend_from_slice(&chunk[..chunk.len().min(OVERSIZE_PREFIX)]);
                    prefix.truncate(OVERSIZE_PREFIX);
                    self.oversize = Some(prefix);
                }
            }
            if complete {
                self.end_line(out);
            }
        }
    }

    /// Ends the stream: a final line without a newline is decoded too.
    pub fn finish(&mut self, out: &mut Vec<Inbound>) {
        if !self.line.is_empty() || self.oversize.is_some() {
            self.end_line(out);
        }
    }

    fn end_line(&mut self, out: &mut Vec<Inbound>) {
        if let Some(prefix) = self.oversize.take() {
            if prefix.starts_with(br#"{"type":"done","#)
                || prefix.starts_with(br#"{"type":"log","text":"#)
            {
                out.push(Inbound::OutputOverflow);
            } else if let Some(id) = call_id(&prefix) {
                out.push(Inbound::OversizedCall { id });
            }
        } else if let Some(frame) = decode_child_frame(&self.line) {
            out.push(Inbound::Frame(frame));
        }
        self.line.clear();
        // Keep the buffer's capacity for the next frame, but not a huge one from a past frame.
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
    }
}

/// Makes room for `additional` more bytes in `line`, doubling as a `Vec` does but never past
/// `limit`: a frame just under the limit holds its bytes, not twice them.
fn grow(line: &mut Vec<u8>, additional: usize, limit: usize) {
    let needed = line.len() + additional;
    if needed > line.capacity() {
        let target = needed.max(line.capacity().saturating_mul(2)).min(limit);
        line.reserve_exact(target.max(needed) - line.len());
    }
}

/// The id of a call frame from its first bytes, `{"type":"call","id":N,`.
fn call_id(prefix: &[u8]) -> Option<u64> {
    let rest = prefix.strip_prefix(CALL_PREFIX)?;
    let end = rest.iter().position(|&b| b == b',')?;
    let digits = std::str::from_utf8(&rest[..end]).ok()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|id| (1..=MAX_CALL_ID).contains(id))
}

#[cfg(test)]
mod tests {
    use super::super::{ChildFrame, Completion};
    use super::*;

    #[test]
    fn splits_and_bounds_lines() {
        let mut d = FrameDecoder::new(64);
        let mut out = Vec::new();
        d.feed(b"{\"type\":\"log\",\"te", &mut out);
        d.feed(
            b"xt\":\"a\"}\njunk\n{\"type\":\"log\",\"text\":\"",
            &mut out,
        );
        d.feed(&[b'x'; 200], &mut out);
        d.feed(
            b"\"}\n{\"type\":\"done\",\"error\":{\"kind\":\"exception\",\"message\":\"",
            &mut out,
        );
        d.feed(&[b'x'; 200], &mut out);
        d.feed(b"\"}}\n{\"type\":\"done\"}", &mut out);
        d.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Inbound::Frame(ChildFrame::Log { text: "a".into() }),
                Inbound::OutputOverflow,
                Inbound::OutputOverflow,
                Inbound::Frame(ChildFrame::Done(Completion::Value(None))),
            ]
        );
    }

    #[test]
    fn a_frame_buffer_never_doubles_past_its_limit() {
        let limit = 3 << 20;
        let mut d = FrameDecoder::new(limit);
        let mut out = Vec::new();
        let text = "a".repeat(limit - 32);
        let line = format!(r#"{{"type":"log","text":"{text}"}}"#);
        for chunk in line.as_bytes().chunks(64 << 10) {
            d.feed(chunk, &mut out);
            assert!(d.line.capacity() <= limit, "{}", d.line.capacity());
        }
        d.feed(b"\n", &mut out);
        assert_eq!(out, vec![Inbound::Frame(ChildFrame::Log { text })]);
    }
}
