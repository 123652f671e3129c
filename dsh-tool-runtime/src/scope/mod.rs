//! Agent scopes.
//!
//! One global layer plus one layer per agent scope. A scope sees global tools, then its ancestors'
//! tools (nearer shadowing farther), filtered by every restriction on its chain, then its own tools,
//! which shadow inherited names and are exempt from restrictions.
//!
//! The scope handle, its layers, filters and modes are the registry's (`registry/`); an agent's
//! id is below everything that carries it (`agent_id.rs`). This module names them together.

pub use crate::agent_id::AgentId;
pub use crate::registry::{AgentScope, Filter, Layer, Mode};
