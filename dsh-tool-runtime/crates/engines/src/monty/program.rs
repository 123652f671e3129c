//! The source Monty runs: the program as the body of an async function, the binding namespaces
//! and error classes after it.

use std::fmt::Write as _;

use serde_json::Value;

use super::values::push_string;

/// The external function every binding call goes through: the wrapper calls it, the
/// interpreter answers it.
pub(super) const CALL: &str = "_dsh_call";

/// The source Monty runs: the program as the body of an async function (so that it may
/// `return` and `await`), the namespaces and error classes after it, then the call. Line `n`
/// of the program is line `n + 1` of the source. Returns the source and the program's line
/// count.
pub(super) fn wrap(program: &str, namespaces: &[Value]) -> (String, u32) {
    let mut source = String::from("async def __dsh_program():\n");
    let mut lines = 0u32;
    for (line, starts_in_string) in split_lines(program) {
        lines += 1;
        if !starts_in_string && !line.trim().is_empty() {
            source.push_str("    ");
        }
        source.push_str(line);
        source.push('\n');
    }
    source.push_str("    pass\n");
    let mut classes = Vec::new();
    for ns in namespaces {
        let Some(global) = ns["global"].as_str() else {
            continue;
        };
        let names: Vec<&str> = ns["names"]
            .as_array()
            .map(|n| n.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // Monty has no class inheritance and its exceptions take one string: a failed call
        // raises `RuntimeError(message)`, and the error class is another name for it.
        if let Some(class) = ns
            .get("errorClass")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            && is_identifier(class)
            && !classes.contains(&class)
        {
            classes.push(class);
            let _ = writeln!(source, "{class} = RuntimeError");
        }
        let _ = writeln!(source, "class __dsh_ns_{global}:");
        let mut quoted = String::new();
        push_string(&mut quoted, global);
        for name in &names {
            let mut q = String::new();
            push_string(&mut q, name);
            let _ = write!(
                source,
                "    async def _dsh_b_{}(self, *given, **keywords):\n        if not given:\n            args = keywords\n        elif keywords:\n            raise RuntimeError('pass the arguments as keywords or as one dict, not both')\n        elif len(given) > 1:\n            raise TypeError('a binding takes one argument')\n        else:\n            args = given[0]\n        ok, value, code = await {CALL}({quoted}, {q}, args)\n        if ok:\n            return value\n        raise RuntimeError(value)\n",
                mangle(name),
            );
        }
        for name in &names {
            if is_identifier(name) {
                let _ = writeln!(source, "    {name} = _dsh_b_{}", mangle(name));
            }
        }
        source.push_str("    pass\n");
        let _ = writeln!(source, "{global} = __dsh_ns_{global}()");
        // Monty has no `__getitem__`: other names are attributes, reached with `getattr`.
        for name in names.iter().filter(|n| !is_identifier(n)) {
            let mut q = String::new();
            push_string(&mut q, name);
            let _ = writeln!(
                source,
                "setattr({global}, {q}, {global}._dsh_b_{})",
                mangle(name)
            );
        }
    }
    source.push_str("await __dsh_program()\n");
    (source, lines)
}

/// A name as part of an identifier: its bytes in hex, so that any binding name fits.
fn mangle(name: &str) -> String {
    name.bytes().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The program's lines, each with whether it starts inside a string literal (whose text must
/// not be indented).
fn split_lines(program: &str) -> Vec<(&str, bool)> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Code,
        Short(u8),
        Long(u8),
    }
    let mut state = State::Code;
    let mut out = Vec::new();
    for line in program.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push((line, state != State::Code));
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match state {
                State::Code => match b {
                    b'#' => break,
                    b'\'' | b'"' => {
                        if bytes.get(i + 1) == Some(&b) && bytes.get(i + 2) == Some(&b) {
                            state = State::Long(b);
                            i += 2;
                        } else {
                            state = State::Short(b);
                        }
                    }
                    _ => {}
                },
                State::Short(q) | State::Long(q) => {
                    if b == b'\\' {
                        i += 1;
                    } else if b == q {
                        if let State::Long(_) = state {
                            if bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q) {
                                state = State::Code;
                                i += 2;
                            }
                        } else {
                            state = State::Code;
                        }
                    }
                }
            }
            i += 1;
        }
        // A short string ends with its line unless the line ends in a backslash.
        if let State::Short(_) = state
            && !line.ends_with('\\')
        {
            state = State::Code;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_inside_long_strings_keep_their_text() {
        let lines = split_lines("a = '''x\n  y'''\nb = 1 # '''\nc = \"\\\n\"");
        let starts: Vec<bool> = lines.iter().map(|l| l.1).collect();
        assert_eq!(starts, [false, true, false, false, true]);
    }
}
