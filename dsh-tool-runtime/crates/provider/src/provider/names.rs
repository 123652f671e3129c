//! Tool names a provider accepts, and the way back from the name sent to the registry's tool.
//!
//! The documented rules: OpenAI function names and Anthropic tool names match
//! `^[a-zA-Z0-9_-]{1,64}$`; a Gemini `FunctionDeclaration.name` starts with a letter or `_`, holds
//! letters, digits, `_`, `.` and `-`, and is at most 64 characters long (63 in the older text,
//! which is the bound used here). A registry admits any name (`server.tool`, a long generated
//! name), so names outside the rule are sent renamed and mapped back when the model calls them.

use std::collections::{HashMap, HashSet};

use super::Provider;

/// Longest name the provider accepts.
fn max_len(provider: Provider) -> usize {
    match provider {
        Provider::Gemini => 63,
        _ => 64,
    }
}

/// `true` when `c` may appear in a name the provider accepts.
fn allowed(provider: Provider, c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || (provider == Provider::Gemini && c == '.')
}

/// `true` when the provider accepts `name` as it is.
pub(crate) fn admits(provider: Provider, name: &str) -> bool {
    let first_ok = match provider {
        Provider::Gemini => name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'),
        _ => !name.is_empty(),
    };
    first_ok && name.len() <= max_len(provider) && name.chars().all(|c| allowed(provider, c))
}

/// 64-bit FNV-1a of `text`: a stable hash (the same name gives the same suffix in every build
/// and process), not a secret.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `name` in the provider's alphabet: every other character `_`, and for Gemini a leading `_`
/// when the name does not start with a letter or `_`.
fn sanitized(provider: Provider, name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if allowed(provider, c) { c } else { '_' })
        .collect();
    let starts_ok = out
        .chars()
        .next()
        .is_some_and(|c| provider != Provider::Gemini || c.is_ascii_alphabetic() || c == '_');
    if !starts_ok {
        out.insert(0, '_');
    }
    out
}

/// The names a request sends, for the registry's names in request order: each admitted name as
/// it is; each other name in the provider's alphabet, and, when that is too long or taken, cut
/// and suffixed with `_` and 8 hex digits of the real name's FNV-1a hash (then `_2`, `_3`, …
/// should even that be taken).
///
/// Deterministic: admitted names are kept first, so a renamed tool never takes a real tool's
/// name; the others are renamed in the order of their real names, so the outcome does not depend
/// on the order tools were registered in.
pub(crate) fn wire_names(provider: Provider, names: &[&str]) -> Vec<String> {
    let mut taken: HashSet<String> = names
        .iter()
        .filter(|name| admits(provider, name))
        .map(|name| (*name).to_owned())
        .collect();
    let mut renamed: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !admits(provider, name))
        .collect();
    renamed.sort_unstable();
    renamed.dedup();
    let max = max_len(provider);
    let mut chosen: HashMap<&str, String> = HashMap::with_capacity(renamed.len());
    for name in renamed {
        let base = sanitized(provider, name);
        let mut candidate = base.clone();
        let mut attempt = 0usize;
        while candidate.len() > max || taken.contains(&candidate) {
            attempt += 1;
            let suffix = match attempt {
                1 => format!("_{:08x}", fnv1a(name) as u32),
                n => format!("_{:08x}_{n}", fnv1a(name) as u32),
            };
            // `base` is ASCII: any byte offset is a character boundary.
            let keep = base.len().min(max - suffix.len());
            candidate = format!("{}{suffix}", &base[..keep]);
        }
        taken.insert(candidate.clone());
        chosen.insert(name, candidate);
    }
    names
        .iter()
        .map(|name| {
            chosen
                .get(name)
                .cloned()
                .unwrap_or_else(|| (*name).to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_per_provider() {
        for provider in [
            Provider::OpenAiChat,
            Provider::OpenAiResponses,
            Provider::Anthropic,
        ] {
            assert!(admits(provider, "get-sum_2"));
            assert!(admits(provider, "9lives"));
            assert!(!admits(provider, "server.tool"));
            assert!(!admits(provider, ""));
            assert!(admits(provider, &"a".repeat(64)));
            assert!(!admits(provider, &"a".repeat(65)));
            assert!(!admits(provider, "récupérer"));
        }
        assert!(admits(Provider::Gemini, "server.tool"));
        assert!(!admits(Provider::Gemini, "9lives"));
        assert!(!admits(Provider::Gemini, "-x"));
        assert!(!admits(Provider::Gemini, &"a".repeat(64)));
    }

    #[test]
    fn every_name_sent_is_admitted_and_distinct() {
        let long = "x".repeat(100);
        let names = [
            "a.b",
            "a_b",
            "a:b",
            "a b",
            "9lives",
            &long,
            "récupérer",
            "",
            ".",
            "_",
        ];
        for provider in Provider::ALL {
            let sent = wire_names(provider, &names);
            let distinct: HashSet<&String> = sent.iter().collect();
            assert_eq!(distinct.len(), names.len(), "{provider}: {sent:?}");
            for name in &sent {
                assert!(admits(provider, name), "{provider}: {name:?}");
            }
        }
    }

    #[test]
    fn order_of_registration_does_not_change_the_names() {
        let one = wire_names(Provider::OpenAiChat, &["a.b", "a:b", "c"]);
        let two = wire_names(Provider::OpenAiChat, &["c", "a:b", "a.b"]);
        let suffixed = format!("a_b_{:08x}", fnv1a("a:b") as u32);
        assert_eq!(one, ["a_b", suffixed.as_str(), "c"]);
        assert_eq!(two, [one[2].clone(), one[1].clone(), one[0].clone()]);
    }
}
