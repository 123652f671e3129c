//! Public names of MCP tools (REFERENCE §5): `mcp__<server>__<raw>`, normalized and hashed when
//! the raw name has characters outside `[A-Za-z0-9_-]` or the result is longer than 64.

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

/// `true` for a valid MCP server name: `[A-Za-z0-9_-]{1,32}`.
pub fn is_valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len()) && name.chars().all(allowed)
}

/// The registry name of the MCP tool `raw` on server `server`.
///
/// `mcp__<server>__<raw>` verbatim when it is made only of `[A-Za-z0-9_-]` and at most 64
/// characters long; otherwise every other character becomes `_`, the result is cut to 51
/// characters and `_` plus the first 12 hex digits of `sha256(server + "\0" + raw)` is appended
/// (64 characters at most). A pure function: two different raw names never share a name
/// (`admin.reset` and `admin_reset` differ by the hash).
///
/// ```
/// use dsh_tool_runtime::mcp::mcp_tool_name;
/// assert_eq!(mcp_tool_name("everything", "get-sum"), "mcp__everything__get-sum");
/// assert!(mcp_tool_name("srv", "admin.reset").starts_with("mcp__srv__admin_reset_"));
/// ```
pub fn mcp_tool_name(server: &str, raw: &str) -> String {
    let full = format!("mcp__{server}__{raw}");
    if full.len() <= MAX_TOOL_NAME_LEN && full.chars().all(allowed) {
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
        assert!(!is_valid_server_name(""));
        assert!(!is_valid_server_name("a.b"));
        assert!(!is_valid_server_name(&"x".repeat(33)));
    }
}
