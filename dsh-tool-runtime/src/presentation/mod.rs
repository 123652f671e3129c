//! UI card vocabulary for pending and completed calls.
//!
//! Presenters are pure functions of the arguments (and of the durable result, including `meta`)
//! because UIs call them live and again on replay.

pub(crate) mod presenter;
pub mod replay;

pub use crate::cards::{
    CallView, FileDiff, FileLocation, ReadLine, ResultView, SearchFile, SearchMatch, SearchShape,
    ToolCallKind,
};
