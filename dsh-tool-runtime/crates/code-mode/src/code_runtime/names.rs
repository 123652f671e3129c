//! The portable identifier rules for binding namespaces, shared by both languages so one set of
//! namespaces works in TypeScript and Python alike.

use std::collections::HashSet;

use super::BindingNamespace;
use crate::sdk::PYTHON_KEYWORDS;

/// ECMAScript reserved words, strict-mode words and Python soft keywords; Python's hard keywords
/// come from the SDK generator's list ([`crate::sdk`]), so both agree.
const PORTABLE_RESERVED_WORDS: &[&str] = &[
    // ECMAScript reserved words (ECMA-262 §12.7.2).
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    // Reserved in strict-mode code, which programs run as.
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    // Python soft keywords (`keyword.softkwlist`).
    "match",
    "type",
    "_",
];

/// Globals the bootstraps define themselves.
const RESERVED_BINDING_GLOBALS: &[&str] = &[
    "console",
    "__dsh_main__",
    "__builtins__",
    "__name__",
    "__debug__",
];

/// Members every error already has in one of the two languages.
const RESERVED_ERROR_MEMBERS: &[&str] = &[
    "name",
    "code",
    "message",
    "stack",
    "args",
    "with_traceback",
    "add_note",
];

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn is_usable_identifier(s: &str) -> bool {
    is_identifier(s) && !PORTABLE_RESERVED_WORDS.contains(&s) && !PYTHON_KEYWORDS.contains(&s)
}

fn is_dunder(s: &str) -> bool {
    s.len() > 4 && s.starts_with("__") && s.ends_with("__")
}

/// Checks binding namespaces against the portable identifier rules.
///
/// A global and an error-class name must match `[A-Za-z_][A-Za-z0-9_]*`, must not be a reserved
/// word of ECMAScript (strict mode included) or Python (soft keywords included), and a global must
/// not be one the bootstraps define (`console`, `__dsh_main__`, `__builtins__`, `__name__`,
/// `__debug__`). Globals and error classes share one scope, so no name may appear twice. The
/// member-name property must be non-empty, not dunder-shaped and not an existing error member
/// (`name message stack args with_traceback add_note`). Binding names themselves are free-form.
///
/// # Errors
///
/// The first broken rule, e.g. `reserved binding global "console"`.
pub fn validate_namespaces(namespaces: &[BindingNamespace]) -> Result<(), String> {
    let mut globals = HashSet::new();
    for ns in namespaces {
        let g = ns.global.as_str();
        if !is_usable_identifier(g) {
            return Err(format!("binding global {g:?} is not a usable identifier"));
        }
        if RESERVED_BINDING_GLOBALS.contains(&g) {
            return Err(format!("reserved binding global {g:?}"));
        }
        if !globals.insert(g) {
            return Err(format!("duplicate binding global {g:?}"));
        }
    }
    for ns in namespaces {
        let Some(class) = &ns.error_class else {
            continue;
        };
        let n = class.name.as_str();
        if !is_usable_identifier(n) || RESERVED_BINDING_GLOBALS.contains(&n) {
            return Err(format!(
                "binding error class {n:?} is not a usable identifier"
            ));
        }
        if !globals.insert(n) {
            return Err(format!("duplicate injected global {n:?}"));
        }
        let p = class.member_name_property.as_str();
        if p.is_empty() || is_dunder(p) || RESERVED_ERROR_MEMBERS.contains(&p) {
            return Err(format!("binding error member property {p:?} is not usable"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_runtime::ErrorClass;

    fn ns(global: &str, class: Option<(&str, &str)>) -> BindingNamespace {
        BindingNamespace {
            global: global.to_owned(),
            names: vec!["a".to_owned()],
            error_class: class.map(|(n, p)| ErrorClass {
                name: n.to_owned(),
                member_name_property: p.to_owned(),
            }),
        }
    }

    #[test]
    fn accepts_the_tool_namespace() {
        assert_eq!(
            validate_namespaces(&[BindingNamespace::tools(["x", "__proto__"])]),
            Ok(())
        );
    }

    #[test]
    fn rejects_each_rule() {
        let cases: &[(Vec<BindingNamespace>, &str)] = &[
            (
                vec![ns("a-b", None)],
                r#"binding global "a-b" is not a usable identifier"#,
            ),
            (
                vec![ns("$x", None)],
                r#"binding global "$x" is not a usable identifier"#,
            ),
            (
                vec![ns("match", None)],
                r#"binding global "match" is not a usable identifier"#,
            ),
            (
                vec![ns("yield", None)],
                r#"binding global "yield" is not a usable identifier"#,
            ),
            (
                vec![ns("console", None)],
                r#"reserved binding global "console""#,
            ),
            (
                vec![ns("t", None), ns("t", None)],
                r#"duplicate binding global "t""#,
            ),
            (
                vec![ns("t", Some(("E-1", "m")))],
                r#"binding error class "E-1" is not a usable identifier"#,
            ),
            (
                vec![ns("t", Some(("t", "m")))],
                r#"duplicate injected global "t""#,
            ),
            (
                vec![ns("t", Some(("E", "m"))), ns("u", Some(("E", "m")))],
                r#"duplicate injected global "E""#,
            ),
            (
                vec![ns("t", Some(("E", "message")))],
                r#"binding error member property "message" is not usable"#,
            ),
            (
                vec![ns("t", Some(("E", "__x__")))],
                r#"binding error member property "__x__" is not usable"#,
            ),
            (
                vec![ns("t", Some(("E", "")))],
                r#"binding error member property "" is not usable"#,
            ),
        ];
        for (namespaces, message) in cases {
            assert_eq!(validate_namespaces(namespaces), Err((*message).to_owned()));
        }
    }
}
