use std::fmt::Display;
use std::sync::Arc;

use dsh_tools::{ToolExec, tool, toolbox};

struct Store<K, const N: usize> {
    keys: Vec<K>,
}

#[toolbox]
impl<K: Clone + Send + Sync + 'static, const N: usize> Store<K, N>
where
    K: Display,
{
    /// List up to `limit` keys.
    #[tool(timeout_ms = 100)]
    async fn list(&self, limit: usize, exec: &ToolExec) -> Vec<String> {
        let _ = exec.call_id();
        self.keys
            .iter()
            .take(limit.min(N))
            .map(ToString::to_string)
            .collect()
    }
}

/// Runs the case.
pub(crate) fn main() {
    let store = Arc::new(Store::<String, 4> {
        keys: vec!["a".into()],
    });
    let _definitions = store.tools();
}
