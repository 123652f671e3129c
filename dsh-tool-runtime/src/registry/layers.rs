//! A layer of registrations: the global one, or one agent's.

use std::collections::BTreeMap;

use super::{Filter, Mode};
use crate::definition::ToolDefinition;
use crate::hooks::{ExecuteWrapper, Guard, PostExecuteHook, PreExecuteHook, ResultObserver};

#[derive(Default)]
pub struct Layer {
    pub tools: BTreeMap<String, (u64, ToolDefinition)>,
    pub restrictions: Vec<(u64, Filter)>,
    pub guards: Vec<(u64, Guard)>,
    pub pre: Vec<(u64, PreExecuteHook)>,
    pub wrappers: Vec<(u64, ExecuteWrapper)>,
    pub post: Vec<(u64, PostExecuteHook)>,
    pub observers: Vec<(u64, ResultObserver)>,
    pub mode: Option<(u64, Mode)>,
}

impl std::fmt::Debug for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The guards and hooks are closures: their ids only.
        fn ids<T>(entries: &[(u64, T)]) -> Vec<u64> {
            entries.iter().map(|(id, _)| *id).collect()
        }
        f.debug_struct("Layer")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("restrictions", &ids(&self.restrictions))
            .field("guards", &ids(&self.guards))
            .field("pre", &ids(&self.pre))
            .field("wrappers", &ids(&self.wrappers))
            .field("post", &ids(&self.post))
            .field("observers", &ids(&self.observers))
            .field("mode", &self.mode)
            .finish()
    }
}

impl Layer {
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.len();
        self.tools.retain(|_, (entry, _)| *entry != id);
        self.restrictions.retain(|(entry, _)| *entry != id);
        self.guards.retain(|(entry, _)| *entry != id);
        self.pre.retain(|(entry, _)| *entry != id);
        self.wrappers.retain(|(entry, _)| *entry != id);
        self.post.retain(|(entry, _)| *entry != id);
        self.observers.retain(|(entry, _)| *entry != id);
        if self.mode.is_some_and(|(entry, _)| entry == id) {
            self.mode = None;
        }
        self.len() != before
    }

    fn len(&self) -> usize {
        self.tools.len()
            + self.restrictions.len()
            + self.guards.len()
            + self.pre.len()
            + self.wrappers.len()
            + self.post.len()
            + self.observers.len()
            + usize::from(self.mode.is_some())
    }
}
