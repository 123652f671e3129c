//! The host's frame decoder against hostile input: seeded random and malformed frames.

use dsh_tools::__private::frame::{ChildFrame, FrameDecoder, Inbound, MAX_DEPTH};

/// xorshift64*: a tiny deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const VALID: &[&str] = &[
    r#"{"type":"call","id":1,"global":"tools","name":"x","args":{"a":[1,2.5,"s",null,true]}}"#,
    r#"{"type":"log","text":"hello \"world\" \u00e9"}"#,
    r#"{"type":"done","value":{"k":[{},[]]}}"#,
    r#"{"type":"done","error":{"kind":"exception","message":"Error: x"}}"#,
    r#"{"type":"done"}"#,
];

const TOKENS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800", "null", "true", "-0", "1e999", "-",
    "0.", "\"type\"", "\"call\"", "\"done\"", "\"log\"", "\"id\"", "\"args\"", "\u{0}", "é",
];

fn junk(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        // Random bytes.
        0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
        // Random token soup.
        1 => (0..rng.below(40))
            .flat_map(|_| TOKENS[rng.below(TOKENS.len())].bytes())
            .collect(),
        // A valid frame with bytes flipped, cut or duplicated.
        2 => {
            let mut bytes = VALID[rng.below(VALID.len())].as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(bytes.len());
                match rng.below(3) {
                    0 => bytes[i] = rng.next() as u8,
                    1 => bytes.truncate(i),
                    _ => {
                        let b = bytes[i];
                        bytes.insert(i, b);
                    }
                }
                if bytes.is_empty() {
                    break;
                }
            }
            bytes
        }
        // Now and then, deep nesting around and beyond the bound.
        _ if rng.below(200) == 0 => {
            let depth = MAX_DEPTH - 2 + rng.below(6);
            let open = if rng.below(2) == 0 { "[" } else { "{\"a\":" };
            let close = if open == "[" { "]" } else { "}" };
            format!(
                r#"{{"type":"done","value":{}0{}}}"#,
                open.repeat(depth),
                close.repeat(depth)
            )
            .into_bytes()
        }
        // Otherwise nesting without the closing brackets.
        _ => "[".repeat(rng.below(300)).into_bytes(),
    }
}

#[test]
fn random_and_malformed_frames_never_panic_and_junk_is_dropped() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Large enough for the deepest frames, so they reach the JSON decoder.
    let mut decoder = FrameDecoder::new(1 << 16);
    let mut out = Vec::new();
    let mut markers = 0u64;
    let mut stream = Vec::new();
    for round in 0..100_000u64 {
        let mut frame = junk(&mut rng);
        frame.retain(|&b| b != b'\n');
        stream.extend_from_slice(&frame);
        stream.push(b'\n');
        // Every junk line is followed by a marker that must come through untouched.
        stream.extend_from_slice(format!(r#"{{"type":"log","text":"marker {round}"}}"#).as_bytes());
        stream.push(b'\n');
        if stream.len() > 1 << 16 || round == 99_999 {
            let mut rest = &stream[..];
            while !rest.is_empty() {
                let n = (1 + rng.below(4096)).min(rest.len());
                decoder.feed(&rest[..n], &mut out);
                rest = &rest[n..];
            }
            stream.clear();
            for inbound in out.drain(..) {
                if let Inbound::Frame(ChildFrame::Log { text }) = inbound
                    && let Some(n) = text.strip_prefix("marker ")
                {
                    assert_eq!(n.parse::<u64>().unwrap(), markers);
                    markers += 1;
                }
            }
        }
    }
    decoder.finish(&mut out);
    assert_eq!(markers, 100_000, "a junk line swallowed a valid frame");
}

#[test]
fn oversized_frames_are_skipped_without_buffering_them() {
    let mut decoder = FrameDecoder::new(1024);
    let mut out = Vec::new();
    decoder.feed(
        br#"{"type":"call","id":1,"global":"t","name":"x","args":""#,
        &mut out,
    );
    for _ in 0..1000 {
        decoder.feed(&[b'a'; 1024], &mut out);
    }
    decoder.feed(b"\"}\n{\"type\":\"done\"}\n", &mut out);
    // The call is answered (rejected) by id; nothing of it was kept.
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0], Inbound::OversizedCall { id: 1 });
    assert!(matches!(out[1], Inbound::Frame(ChildFrame::Done(_))));
}
