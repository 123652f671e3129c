use dsh_tools::{tool, toolbox};

struct Store<K> {
    keys: Vec<K>,
}

#[toolbox]
impl<K: Clone + Send + Sync + 'static> Store<K> {
    /// Insert a key.
    #[tool]
    async fn insert(&self, key: K) -> usize {
        let _ = key;
        self.keys.len()
    }

    /// Get a key.
    #[tool]
    async fn get(&self, index: usize) -> Option<Self> {
        let _ = index;
        None
    }
}

fn main() {}
