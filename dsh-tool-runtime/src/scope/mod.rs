//! Agent scopes.
//!
//! One global layer plus one layer per agent scope. A scope sees global tools, then its ancestors'
//! tools (nearer shadowing farther), filtered by every restriction on its chain, then its own tools,
//! which shadow inherited names and are exempt from restrictions.

mod agent_id;
mod agent_scope;
mod filter;
mod layers;
mod mode;

pub use agent_id::AgentId;
pub use agent_scope::AgentScope;
pub use filter::Filter;
pub use layers::Layer;
pub use mode::Mode;
