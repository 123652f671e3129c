//! Public names of MCP tools: `mcp__<server>__<raw>`, normalized and hashed when the raw name
//! has characters outside `[A-Za-z0-9_-]`, the result is longer than 64, or it ends the way a
//! hashed name ends.
//!
//! The scheme is injective by construction: a server name holds no `__` and does not end in
//! `_`, so the first `__` after `mcp__` always ends the server name and two verbatim names
//! differ whenever their (server, raw) pairs do; a verbatim name never ends in `_` plus 12
//! lowercase hex digits, which every hashed name does, so no verbatim name equals a hashed one.
//! Hashed names carry 48 bits of `sha256(server, raw)`; the bridge skips a tool whose name is
//! taken anyway (with a warning) rather than dropping its server.

use sha2::{Digest, Sha256};

/// Longest public name a provider accepts.
pub const MAX_TOOL_NAME_LEN: usize = 64;
/// Length of the normalized prefix kept before the hash suffix.
const HASHED_PREFIX_LEN: usize = 51;
/// Hex digits of the hash suffix.
const HASH_HEX_LEN: usize = 12;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `true` for a valid MCP server name: `[A-Za-z0-9_-]{1,32}` without `__` and not ending in
/// `_` (so `mcp__<server>__<raw>` names one (server, raw) pair only).
pub fn is_valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.chars().all(allowed)
        && !name.contains("__")
        && !name.ends_with('_')
}

/// `true` when `name` ends in `_` plus [`HASH_HEX_LEN`] lowercase hex digits, as every hashed
/// name does.
fn looks_hashed(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > HASH_HEX_LEN
        && bytes[bytes.len() - HASH_HEX_LEN - 1] == b'_'
        && bytes[bytes.len() - HASH_HEX_LEN..]
            .iter()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

/// The registry name of the MCP tool `raw` on server `server`.
///
/// `mcp__<server>__<raw>` verbatim when it is made only of `[A-Za-z0-9_-]`, at most 64
/// characters long and does not end in `_` plus 12 lowercase hex digits; otherwise every other
/// character becomes `_`, the result is cut to 51 characters and `_` plus the first 12 hex
/// digits of `sha256(server + "\0" + raw)` is appended (64 characters at most). A pure
/// function: for valid server names ([`is_valid_server_name`]) two different (server, raw)
/// pairs never share a verbatim name, and a verbatim name never equals a hashed one
/// (`admin.reset` and `admin_reset` differ by the hash).
///
/// ```
/// use dsh_tool_mcp::mcp::mcp_tool_name;
/// assert_eq!(mcp_tool_name("everything", "get-sum"), "mcp__everything__get-sum");
/// assert!(mcp_tool_name("srv", "admin.reset").starts_with("mcp__srv__admin_reset_"));
/// ```
pub fn mcp_tool_name(server: &str, raw: &str) -> String {
    let full = format!("mcp__{server}__{raw}");
    if full.len() <= MAX_TOOL_NAME_LEN && full.chars().all(allowed) && !looks_hashed(&full) {
        return full;
    }
    let mut name: String = full
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(HASHED_PREFIX_LEN)
        .collect();
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(raw.as_bytes());
    let digest = hasher.finalize();
    name.push('_');
    for byte in digest.iter().take(HASH_HEX_LEN / 2) {
        name.push_str(&format!("{byte:02x}"));
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_when_allowed() {
        assert_eq!(
            mcp_tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            mcp_tool_name("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
    }

    #[test]
    fn hashed_when_characters_are_replaced() {
        let dotted = mcp_tool_name("srv", "admin.reset");
        assert!(dotted.starts_with("mcp__srv__admin_reset_"), "{dotted}");
        assert_eq!(dotted.len(), "mcp__srv__admin_reset_".len() + 12);
        assert!(
            dotted[dotted.len() - 12..]
                .chars()
                .all(|c| c.is_ascii_hexdigit())
        );
        assert_ne!(dotted, mcp_tool_name("srv", "admin_reset"));
        assert_eq!(dotted, mcp_tool_name("srv", "admin.reset"));
    }

    #[test]
    fn long_names_are_cut_to_64_with_the_hash() {
        let raw = "a".repeat(80);
        let name = mcp_tool_name("srv", &raw);
        assert_eq!(name.len(), 64);
        assert_eq!(&name[..51], &format!("mcp__srv__{raw}")[..51]);
        assert_eq!(&name[51..52], "_");
        assert_ne!(name, mcp_tool_name("srv", &"a".repeat(81)));
    }

    #[test]
    fn non_ascii_raw_names_stay_within_the_alphabet() {
        let name = mcp_tool_name("srv", "récupérer");
        assert!(name.chars().all(allowed), "{name}");
        assert!(name.len() <= 64);
    }

    #[test]
    fn server_names() {
        assert!(is_valid_server_name("everything"));
        assert!(is_valid_server_name("a-b_C9"));
        assert!(is_valid_server_name("_a"));
        assert!(!is_valid_server_name(""));
        assert!(!is_valid_server_name("a.b"));
        assert!(!is_valid_server_name(&"x".repeat(33)));
        // Either would let two (server, tool) pairs share a name: `a__b`+`c` and `a`+`b__c`,
        // `a_`+`b` and `a`+`_b`.
        assert!(!is_valid_server_name("a__b"));
        assert!(!is_valid_server_name("a_"));
        assert!(!is_valid_server_name("_"));
    }

    /// A raw name spelled like a hashed one is hashed itself, so it cannot take the name the
    /// hash gives another tool.
    #[test]
    fn a_verbatim_name_never_equals_a_hashed_one() {
        let hashed = mcp_tool_name("srv", "admin.reset");
        let raw = hashed.strip_prefix("mcp__srv__").unwrap();
        assert_eq!(raw.len(), "admin_reset_".len() + 12);
        let spelled_alike = mcp_tool_name("srv", raw);
        assert_ne!(spelled_alike, hashed);
        assert!(spelled_alike.starts_with(&hashed), "{spelled_alike}");
        // Uppercase hex or another length is no hash suffix: verbatim.
        assert_eq!(
            mcp_tool_name("srv", "x_0123456789AB"),
            "mcp__srv__x_0123456789AB"
        );
        assert_eq!(
            mcp_tool_name("srv", "x_0123456789a"),
            "mcp__srv__x_0123456789a"
        );
    }

    /// Every (server, raw) pair over a small alphabet that makes separators and hash suffixes
    /// likely gets a name of its own.
    #[test]
    fn names_are_injective_over_tricky_pairs() {
        let servers = ["a", "a-b", "_a", "a_b", "b"];
        let raws = [
            "b",
            "_b",
            "__b",
            "b__c",
            "a__b",
            "b_",
            "x.y",
            "x_y",
            "c_0123456789ab",
        ];
        let mut seen = std::collections::HashMap::new();
        for server in servers {
            assert!(is_valid_server_name(server), "{server}");
            for raw in raws {
                let name = mcp_tool_name(server, raw);
                if let Some(other) = seen.insert(name.clone(), (server, raw)) {
                    panic!("{name} names both {other:?} and {:?}", (server, raw));
                }
            }
        }
    }
}
