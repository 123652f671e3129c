//! Visibility masks (`restrict`).

use std::collections::BTreeSet;

/// A visibility mask for an agent scope (`restrict`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Filter {
    /// Only these inherited tools stay visible; tools registered later are excluded.
    Allow(BTreeSet<String>),
    /// These inherited tools are hidden; tools registered later stay visible.
    Deny(BTreeSet<String>),
}

impl Filter {
    /// An allow-list.
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Filter::Allow(names.into_iter().map(Into::into).collect())
    }

    /// A deny-list.
    pub fn deny<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Filter::Deny(names.into_iter().map(Into::into).collect())
    }

    pub fn names(&self) -> &BTreeSet<String> {
        match self {
            Filter::Allow(names) | Filter::Deny(names) => names,
        }
    }

    pub fn admits(&self, name: &str) -> bool {
        match self {
            Filter::Allow(names) => names.contains(name),
            Filter::Deny(names) => !names.contains(name),
        }
    }
}
