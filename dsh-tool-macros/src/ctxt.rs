//! The error accumulator: every check reports here and expansion starts only when it is empty,
//! so a fn with three mistakes shows three errors (after serde_derive's `Ctxt`).

use std::cell::{Cell, RefCell};
use std::fmt::Display;

use quote::ToTokens;

/// Collects errors; must be consumed with [`Ctxt::check`].
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
    checked: Cell<bool>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt::default()
    }

    /// Records an error spanning the tokens of `obj`.
    pub(crate) fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        // Converting to a `TokenStream` first curbs monomorphization of `new_spanned`.
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    /// Records one of syn's parse errors.
    pub(crate) fn syn_error(&self, err: syn::Error) {
        self.errors.borrow_mut().push(err);
    }

    /// Consumes the context: `Err` with every error combined, or `Ok` when there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        self.checked.set(true);
        let mut errors = self.errors.take().into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        // A context dropped unchecked would silently lose errors: a bug in this crate, caught in
        // its own tests rather than in users' builds.
        debug_assert!(
            self.checked.get() || std::thread::panicking(),
            "Ctxt dropped without check()"
        );
    }
}
