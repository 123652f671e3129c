//! Running presenters: a presenter that panics or returns an error never fails the call; the UI
//! falls back to the generic card. Also the adapters the `#[tool]` expansion calls, whose
//! diagnostics say which signature a presenter must have.

use std::borrow::Borrow;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

use crate::cards::{CallView, ResultView};
use crate::contain::panic_message;

/// Runs one presenter; a panic is logged through `tracing` and reads as "no card".
pub(crate) fn guarded<R>(tool: &str, hook: &str, present: impl FnOnce() -> Option<R>) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(present)) {
        Ok(view) => view,
        Err(payload) => {
            tracing::warn!(
                "tool \"{tool}\": {hook} panicked, showing the generic card: {}",
                panic_message(payload.as_ref())
            );
            None
        }
    }
}

/// What a presenter produces: a call card, a result card or replayable metadata.
pub trait Presented: sealed::Sealed {}
impl Presented for CallView {}
impl Presented for ResultView {}
impl Presented for Value {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::CallView {}
    impl Sealed for super::ResultView {}
    impl Sealed for serde_json::Value {}
}

/// What a presenter may return: the card, `Option` of it (`None`: generic card), or a `Result`
/// whose error is logged and shows the generic card.
#[diagnostic::on_unimplemented(
    message = "a presenter cannot return `{Self}`",
    label = "this presenter returns `{Self}`",
    note = "`present_call` returns `Option<CallView>`, `present_result` `Option<ResultView>` and `presentation_meta` `serde_json::Value`; each may also return the bare card, or a `Result` whose error shows the generic card"
)]
pub trait IntoPresented<T> {
    /// The card, or `None` (logging an error through `tracing`).
    fn into_presented(self, tool: &str, hook: &str) -> Option<T>;
}

impl<T: Presented> IntoPresented<T> for T {
    fn into_presented(self, _tool: &str, _hook: &str) -> Option<T> {
        Some(self)
    }
}

impl<T: Presented> IntoPresented<T> for Option<T> {
    fn into_presented(self, _tool: &str, _hook: &str) -> Option<T> {
        self
    }
}

impl<T: Presented, E: Display> IntoPresented<T> for Result<T, E> {
    fn into_presented(self, tool: &str, hook: &str) -> Option<T> {
        self.map_err(|err| {
            tracing::warn!("tool \"{tool}\": {hook} failed, showing the generic card: {err}");
        })
        .ok()
    }
}

impl<T: Presented, E: Display> IntoPresented<T> for Result<Option<T>, E> {
    fn into_presented(self, tool: &str, hook: &str) -> Option<T> {
        self.map_err(|err| {
            tracing::warn!("tool \"{tool}\": {hook} failed, showing the generic card: {err}");
        })
        .ok()
        .flatten()
    }
}

/// `#[tool(present_call = f)]`: `f` is `fn(&Args) -> Option<CallView>`.
#[diagnostic::on_unimplemented(
    message = "`present_call` must be a `fn(&{A}) -> Option<CallView>`",
    label = "not a `fn(&{A}) -> Option<CallView>`",
    note = "write `fn present_call(args: &{A}) -> Option<CallView>`"
)]
pub trait PresentCallFn<A> {
    /// Calls the presenter.
    fn present(&self, tool: &str, args: &A) -> Option<CallView>;
}

impl<A, F, R> PresentCallFn<A> for F
where
    F: Fn(&A) -> R,
    R: IntoPresented<CallView>,
{
    fn present(&self, tool: &str, args: &A) -> Option<CallView> {
        self(args).into_presented(tool, "present_call")
    }
}

/// `#[tool(present_result = f)]`: `f` is `fn(&Args, &Output, Option<&Value>) -> Option<ResultView>`.
/// The output may also be taken as anything it borrows as (`&[T]` for a `Vec<T>`, `&str` for a
/// `String`): `T` is inferred from `f`'s signature.
#[diagnostic::on_unimplemented(
    message = "`present_result` must be a `fn(&{A}, &{O}, Option<&Value>) -> Option<ResultView>`",
    label = "not a `fn(&{A}, &{O}, Option<&Value>) -> Option<ResultView>`",
    note = "write `fn present_result(args: &{A}, output: &{O}, meta: Option<&serde_json::Value>) -> Option<ResultView>`"
)]
pub trait PresentResultFn<A, O, T: ?Sized> {
    /// Calls the presenter.
    fn present(&self, tool: &str, args: &A, output: &O, meta: Option<&Value>)
    -> Option<ResultView>;
}

impl<A, O, T, F, R> PresentResultFn<A, O, T> for F
where
    O: Borrow<T>,
    T: ?Sized,
    F: Fn(&A, &T, Option<&Value>) -> R,
    R: IntoPresented<ResultView>,
{
    fn present(
        &self,
        tool: &str,
        args: &A,
        output: &O,
        meta: Option<&Value>,
    ) -> Option<ResultView> {
        self(args, output.borrow(), meta).into_presented(tool, "present_result")
    }
}

/// `#[tool(presentation_meta = f)]`: `f` is `fn(&Args, &Output) -> Value`; the output may be
/// taken as anything it borrows as, as for [`PresentResultFn`].
#[diagnostic::on_unimplemented(
    message = "`presentation_meta` must be a `fn(&{A}, &{O}) -> Value`",
    label = "not a `fn(&{A}, &{O}) -> Value`",
    note = "write `fn presentation_meta(args: &{A}, output: &{O}) -> serde_json::Value`"
)]
pub trait PresentationMetaFn<A, O, T: ?Sized> {
    /// Calls the presenter.
    fn present(&self, tool: &str, args: &A, output: &O) -> Option<Value>;
}

impl<A, O, T, F, R> PresentationMetaFn<A, O, T> for F
where
    O: Borrow<T>,
    T: ?Sized,
    F: Fn(&A, &T) -> R,
    R: IntoPresented<Value>,
{
    fn present(&self, tool: &str, args: &A, output: &O) -> Option<Value> {
        self(args, output.borrow()).into_presented(tool, "presentation_meta")
    }
}
