//! The Python text the renderer writes: comments, unions, numbers and `TypedDict` classes.

use std::collections::BTreeSet;

use super::is_plain_member;
use crate::sdk::text::quoted;

/// A field of a `TypedDict` being assembled.
#[derive(Clone)]
pub(super) struct Field {
    pub(super) key: String,
    pub(super) ty: String,
    pub(super) doc: Option<String>,
    pub(super) required: bool,
}

/// What an assembled object says about undeclared keys in its closing comment. Declared keys
/// render closed whether or not the schema admits more (extra keys stay accepted when the call
/// is checked); only typed extra keys are worth a line.
pub(super) enum ExtraNote {
    None,
    Typed(String),
}

/// `# text`, never a type comment: CPython reads a comment starting `type:` (after blanks) as
/// one when the checker parses with type comments, and a stray one is a syntax error, so such a
/// text gets a blank before its colon.
pub(super) fn comment(text: &str) -> String {
    let start = text.len() - text.trim_start_matches([' ', '\t']).len();
    if text[start..].starts_with("type:") {
        format!("# {}type :{}", &text[..start], &text[start + 5..])
    } else {
        format!("# {text}")
    }
}

/// `name` without the digits the allocator appended.
pub(super) fn stem(name: &str) -> &str {
    name.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Exact decimal digits of an integral JSON number (`1e21` → `1000000000000000000000`), or
/// `None` for a fractional one.
pub(super) fn integer_text(n: &serde_json::Number) -> Option<String> {
    if n.is_i64() || n.is_u64() {
        return Some(n.to_string());
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0).then(|| format!("{f:.0}"))
}

/// Members joined with ` | `, repeats dropped; `None` when there are none.
pub(super) fn union(parts: Vec<String>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = parts
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect();
    (!unique.is_empty()).then(|| unique.join(" | "))
}

/// The closing comment of an object that admits undeclared keys.
fn extra_comment(note: &ExtraNote, indent: &str) -> String {
    match note {
        ExtraNote::None => String::new(),
        ExtraNote::Typed(ty) => {
            format!("{indent}# Keys not listed here hold values of type {ty}.\n")
        }
    }
}

/// A field's doc as a trailing comment (` # …`: one space, as valid as PEP 8's two and a token
/// cheaper), or nothing.
fn trailing(field: &Field) -> String {
    field
        .doc
        .as_ref()
        .map_or_else(String::new, |doc| format!(" {}", comment(doc)))
}

/// One `TypedDict` definition in class syntax, which reads best and carries each field's doc.
/// Keys that cannot be class members (`my-field`, `class`, `Upper`) go into a base of the
/// functional form (PEP 589 "Alternative Syntax", which accepts any string key) named `_<name>`,
/// which the class extends; with no plain key at all, the functional form alone. Bodies are
/// indented by one space: as valid as four, and a token cheaper per line.
pub(super) fn typed_dict(name: &str, total: bool, fields: &[Field], note: &ExtraNote) -> String {
    let total_arg = if total { "" } else { ", total=False" };
    let (plain, odd): (Vec<&Field>, Vec<&Field>) =
        fields.iter().partition(|f| is_plain_member(&f.key));
    let functional =
        |text: &mut String, name: &str, fields: &[&Field], note: Option<&ExtraNote>| {
            text.push_str(&format!("{name} = TypedDict({}, {{\n", quoted(name)));
            for field in fields {
                text.push_str(&format!(
                    " {}: {},{}\n",
                    quoted(&field.key),
                    quoted(&field.ty),
                    trailing(field)
                ));
            }
            if let Some(note) = note {
                text.push_str(&extra_comment(note, " "));
            }
            text.push_str(&format!("}}{total_arg})\n"));
        };
    let mut text = String::new();
    if plain.is_empty() && !odd.is_empty() {
        functional(&mut text, name, &odd, Some(note));
        return text.trim_end().to_owned();
    }
    let base = if odd.is_empty() {
        "TypedDict".to_owned()
    } else {
        // Names the allocator hands out start with a letter, so `_<name>` is never taken.
        let base = format!("_{name}");
        functional(&mut text, &base, &odd, None);
        base
    };
    text.push_str(&format!("class {name}({base}{total_arg}):\n"));
    for field in &plain {
        text.push_str(&format!(
            " {}: {}{}\n",
            field.key,
            field.ty,
            trailing(field)
        ));
    }
    text.push_str(&extra_comment(note, " "));
    if plain.is_empty() {
        text.push_str(" pass\n");
    }
    text.trim_end().to_owned()
}
