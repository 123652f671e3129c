//! TypeScript type stripping on the host, position-preserving: every character of erasable
//! syntax becomes a space (line terminators stay), so line and column numbers in the child's
//! stack traces are the model's own. This is the "strip-only" mode Node.js uses for
//! `--experimental-strip-types`; syntax with run-time meaning (`enum`, `namespace`, parameter
//! properties, `import x = require(...)`, decorators) is refused instead of transformed.
//!
//! Blanking alone can change what a program means where a line break is involved; the rules of
//! the reference strippers (`ts-blank-space`, `swc_fast_ts_strip`) keep it the same program:
//! - an erased statement or class member (`type`, `interface`, `declare ...`, overload and
//!   abstract signatures, index signatures) starts with `;` instead of a space, and so does a
//!   member whose leading modifiers are erased, so the next line never joins the previous one;
//! - an arrow function whose return type spans lines gets its `)` moved to the end of the type,
//!   so no line break separates `)` and `=>`;
//! - an `async` arrow whose type parameters span lines gets its `(` moved up to where the `<`
//!   was, so `async` and its parameters stay on one line;
//! - a prefix type assertion (`<T>value`) followed by a line break is refused: after `return`
//!   blanking it would end the statement.

use oxc::allocator::Allocator;
use oxc::ast_visit::Visit;
use oxc::parser::{ParseOptions, Parser};
use oxc::span::SourceType;

mod erasable_syntax;

use erasable_syntax::Stripper;

/// The largest program accepted, in bytes. The parser recurses per nesting level; this bound
/// together with the big stack of [`strip_types`]'s thread keeps hostile nesting from
/// overflowing it.
pub(crate) const MAX_PROGRAM_BYTES: usize = 256 << 10;

/// The refusal of a program over [`MAX_PROGRAM_BYTES`], in either language: the bound is the
/// stripper's, and every runtime applies it so that programs have one limit.
pub fn oversized(program: &str) -> Option<String> {
    (program.len() > MAX_PROGRAM_BYTES).then(|| {
        format!(
            "program is {} bytes; at most {MAX_PROGRAM_BYTES} are accepted",
            program.len()
        )
    })
}

/// Stack for the stripping thread: generous, and only touched pages are committed.
const STRIP_STACK_BYTES: usize = 1 << 30;

/// Strips `source` (the body of an async function) on a dedicated big-stack thread.
///
/// # Errors
///
/// The text of the `exception` the run ends with: a syntax error with its position
/// (`program.ts:<line>:<column>: <message>`), refused non-erasable syntax, or a program over
/// [`MAX_PROGRAM_BYTES`].
pub async fn strip_types(source: String) -> Result<String, String> {
    if let Some(refusal) = oversized(&source) {
        return Err(refusal);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("dsh-strip-types".to_owned())
        .stack_size(STRIP_STACK_BYTES)
        .spawn(move || {
            // The receiver only goes away when the run itself was dropped.
            let _ = tx.send(strip_now(&source));
        })
        .map_err(|e| format!("could not start the type stripper: {e}"))?;
    rx.await
        .unwrap_or_else(|_| Err("the type stripper stopped unexpectedly".to_owned()))
}

/// Strips `source` on the current thread (which needs a stack sized for the program's nesting).
pub(crate) fn strip_now(source: &str) -> Result<String, String> {
    let allocator = Allocator::default();
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let ret = Parser::new(&allocator, source, SourceType::ts().with_module(true))
        .with_options(options)
        .parse();
    if let Some(error) = ret.diagnostics.iter().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(located(source, offset as usize, &error.message));
    }
    let mut stripper = Stripper {
        source,
        blanks: Vec::new(),
        puts: Vec::new(),
        refused: None,
    };
    stripper.visit_program(&ret.program);
    if let Some((offset, what)) = stripper.refused {
        return Err(located(
            source,
            offset as usize,
            &format!(
                "{what} is not erasable TypeScript syntax; only type annotations can be stripped, so rewrite it with plain JavaScript"
            ),
        ));
    }
    Ok(blank_out(source, stripper.blanks, stripper.puts))
}

fn located(source: &str, offset: usize, message: &str) -> String {
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("SyntaxError: program.ts:{line}:{column}: {message}")
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Replaces every character inside `blanks` by a space, keeping line terminators, then writes
/// each of `puts` (an ASCII character at a blanked byte offset).
fn blank_out(source: &str, mut blanks: Vec<(u32, u32)>, puts: Vec<(u32, u8)>) -> String {
    blanks.sort_unstable();
    let mut out = String::with_capacity(source.len());
    let mut ranges = blanks.into_iter().peekable();
    for (i, c) in source.char_indices() {
        let i = i as u32;
        while ranges.peek().is_some_and(|&(_, end)| end <= i) {
            ranges.next();
        }
        let inside = ranges.peek().is_some_and(|&(start, _)| start <= i);
        if inside && !matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
            // One space per byte keeps every later offset (and so `puts`) in place.
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    let mut bytes = out.into_bytes();
    for (at, byte) in puts {
        // Only onto a space that blanking made, so the text stays UTF-8.
        if bytes.get(at as usize) == Some(&b' ') {
            bytes[at as usize] = byte;
        }
    }
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn same(ts: &str, js: &str) {
        let out = strip_now(ts).unwrap();
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>().join(" "),
            js.split_whitespace().collect::<Vec<_>>().join(" "),
            "stripped {ts:?} to {out:?}"
        );
        assert_eq!(out.lines().count(), ts.lines().count());
    }

    #[test]
    fn strips_erasable_syntax() {
        same("const x: number = 1;", "const x = 1;");
        same("let y!: string;", "let y ;");
        same(
            "function f<T>(a: T, b?: number): T { return a; }",
            "function f (a , b ) { return a; }",
        );
        same(
            "function g(this: Window, a: number) { return a; }",
            "function g( a ) { return a; }",
        );
        same(
            "const v = (x as any).y satisfies unknown;",
            "const v = (x ).y ;",
        );
        same("const w = o!.p!;", "const w = o .p ;");
        same("const z = <number>q;", "const z = q;");
        same(
            "interface I {\n a: string\n}\ntype T = I;\nreturn 1;",
            "; ; return 1;",
        );
        same(
            "declare const d: number;\ndeclare function h(): void;",
            "; ;",
        );
        same(
            "function o(a: string): void;\nfunction o(a: any) {}",
            "; function o(a ) {}",
        );
        same(
            "abstract class A<T> extends B<T> implements C, D {\n private readonly x?: number = 1;\n declare y: string;\n public static m?(): void {}\n abstract n(): void;\n [k: string]: any;\n}",
            "class A extends B {\n ; x = 1;\n ;\n ; static m () {}\n ;\n ;\n}",
        );
        same(
            "const f2 = async <T,>(a: T): Promise<T> => a;",
            "const f2 = async (a ) => a;",
        );
        same(
            "const r = f<string>(1);\nreturn await r;",
            "const r = f (1);\nreturn await r;",
        );
    }

    #[test]
    fn keeps_statement_boundaries_across_line_breaks() {
        // The erased declaration must not let `(b)` call `a`.
        same("let x = a\ntype T = number\n(b)", "let x = a\n;\n(b)");
        same(
            "class C {\n x = a\n private ['k']() {}\n}",
            "class C {\n x = a\n ; ['k']() {}\n}",
        );
        same(
            "const f = (a: number):\n  Promise<number> => g(a)",
            "const f = (a\n ) => g(a)",
        );
        same(
            "const h = async <\n  T,\n>(a: T) => a",
            "const h = async (\n \n a ) => a",
        );
        let err = strip_now("return <number>\n  value").unwrap_err();
        assert!(
            err.contains("type assertion followed by a line break"),
            "{err}"
        );
        let err = strip_now("class K { m(@inject x: number) {} }").unwrap_err();
        assert!(err.contains("a decorator"), "{err}");
    }

    #[test]
    fn keeps_positions() {
        let ts = "const a: {\n  k: number\n} = { k: 1 };\nthrow new Error('x');";
        let js = strip_now(ts).unwrap();
        assert_eq!(js.lines().count(), 4);
        assert_eq!(js.lines().nth(3), Some("throw new Error('x');"));
    }

    #[test]
    fn refuses_non_erasable_syntax() {
        for (ts, what) in [
            ("enum E { A }", "`enum`"),
            ("namespace N { export const a = 1; }", "`namespace`"),
            (
                "class K { constructor(private a: number) {} }",
                "a parameter property",
            ),
            ("import fs = require('fs');", "`import ... = ...`"),
            ("import x from 'y';", "a static `import`"),
        ] {
            let err = strip_now(ts).unwrap_err();
            assert!(err.contains(what), "{ts}: {err}");
            assert!(err.starts_with("SyntaxError: program.ts:1:"), "{err}");
        }
    }

    #[test]
    fn reports_syntax_errors_with_their_line() {
        let err = strip_now("const a = 1;\nconst = ;").unwrap_err();
        assert!(err.starts_with("SyntaxError: program.ts:2:"), "{err}");
    }

    #[tokio::test]
    async fn survives_hostile_nesting() {
        for program in [
            "(".repeat(MAX_PROGRAM_BYTES),
            "!".repeat(MAX_PROGRAM_BYTES - 1) + "x",
            "x".to_owned() + &"+1".repeat(MAX_PROGRAM_BYTES / 2 - 1),
            "[".repeat(MAX_PROGRAM_BYTES / 2) + &"]".repeat(MAX_PROGRAM_BYTES / 2),
        ] {
            // Any answer will do, as long as the process is still here to see it.
            let _ = strip_types(program).await;
        }
        assert!(
            strip_types("x".repeat(MAX_PROGRAM_BYTES + 1))
                .await
                .is_err()
        );
    }
}
