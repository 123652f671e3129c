//! Agent scopes.

use crate::common;

use std::sync::Arc;

use common::{call, mirror};
use dsh_tools::hooks::{PreNext, ToolCallView};
use dsh_tools::registry::{Filter, RegisterError};
use dsh_tools::result::ErrorCode;
use dsh_tools::{AgentId, Mode, Registry};
use serde_json::json;

fn names(schemas: Vec<dsh_tools::definition::ToolSchema>) -> Vec<String> {
    schemas.into_iter().map(|schema| schema.name).collect()
}

#[tokio::test]
async fn own_tools_shadow_inherited_ones_and_stay_private() {
    let registry = Registry::new();
    registry.register(mirror("shared")).unwrap();
    let agent = registry.agent("a");
    let own = dsh_tools::ToolDefinition::builder("shared")
        .handler(|_, _| async { Ok(json!("agent's own")) })
        .build()
        .unwrap();
    agent.register(own).unwrap();
    agent.register(mirror("private")).unwrap();
    assert_eq!(names(agent.schemas()), ["private", "shared"]);
    assert_eq!(names(registry.schemas(None)), ["shared"]);
    let mine = registry
        .execute(call("1", "shared", json!({})).with_agent(agent.id().clone()))
        .await;
    assert_eq!(mine.value(), Some(&json!("agent's own")));
    let global = registry.execute(call("2", "private", json!({}))).await;
    assert_eq!(
        global.error_code(),
        Some(ErrorCode::UnknownTool),
        "out of view is unknown"
    );
    let other = registry
        .execute(call("3", "private", json!({})).with_agent(AgentId::new("b")))
        .await;
    assert_eq!(other.error_code(), Some(ErrorCode::UnknownTool));
}

#[test]
fn deny_masks_admit_later_globals_and_allow_masks_exclude_them() {
    let registry = Registry::new();
    registry.register(mirror("a")).unwrap();
    registry.register(mirror("b")).unwrap();
    let denying = registry.agent("denying");
    denying.restrict(Filter::deny(["a"])).unwrap();
    let allowing = registry.agent("allowing");
    allowing.restrict(Filter::allow(["a"])).unwrap();
    registry.register(mirror("later")).unwrap();
    assert_eq!(names(denying.schemas()), ["b", "later"]);
    assert_eq!(names(allowing.schemas()), ["a"]);
    assert!(allowing.get("later").is_none());
}

#[test]
fn masks_intersect_and_own_tools_are_exempt() {
    let registry = Registry::new();
    for name in ["a", "b", "c"] {
        registry.register(mirror(name)).unwrap();
    }
    let agent = registry.agent("x");
    agent.register(mirror("own")).unwrap();
    let first = agent.restrict(Filter::allow(["a", "b"])).unwrap();
    agent.restrict(Filter::deny(["b"])).unwrap();
    assert_eq!(names(agent.schemas()), ["a", "own"]);
    assert!(first.unregister());
    assert_eq!(names(agent.schemas()), ["a", "c", "own"]);
}

#[test]
fn a_nested_agent_inherits_its_parents_restriction_and_tools() {
    let registry = Registry::new();
    registry.register(mirror("a")).unwrap();
    registry.register(mirror("b")).unwrap();
    let parent = registry.agent("parent");
    parent.restrict(Filter::deny(["a"])).unwrap();
    parent.register(mirror("parent_tool")).unwrap();
    let child = registry.agent_with_parent("child", &parent);
    assert_eq!(names(child.schemas()), ["b", "parent_tool"]);
    // The child may restrict what it inherits from its parent.
    child.restrict(Filter::deny(["parent_tool"])).unwrap();
    assert_eq!(names(child.schemas()), ["b"]);
}

#[test]
fn restrict_errors() {
    let registry = Registry::new();
    registry.register(mirror("b")).unwrap();
    registry.register(mirror("a")).unwrap();
    let agent = registry.agent("x");
    agent.register(mirror("own")).unwrap();
    assert_eq!(
        agent
            .restrict(Filter::allow(Vec::<String>::new()))
            .unwrap_err(),
        RegisterError::EmptyFilter
    );
    assert_eq!(
        agent.restrict(Filter::deny(["run_code"])).unwrap_err(),
        RegisterError::RestrictRunCode
    );
    let err = agent
        .restrict(Filter::deny(["own", "zzz", "a"]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "restrict() names unknown global tool(s) \"own\", \"zzz\"; known global tools: a, b"
    );
    let lonely = Registry::new().agent("y");
    let err = lonely.restrict(Filter::deny(["x"])).unwrap_err();
    assert!(
        err.to_string().ends_with("known global tools: (none)"),
        "{err}"
    );
}

#[test]
fn present_as_nearest_wins_and_conflicts_are_rejected() {
    let registry = Registry::new();
    let parent = registry.agent("p");
    let child = registry.agent_with_parent("c", &parent);
    assert_eq!(child.mode(), Mode::Native);
    let handle = parent.present_as(Mode::Code).unwrap();
    assert_eq!(child.mode(), Mode::Code, "inherited");
    child.present_as(Mode::Native).unwrap();
    assert_eq!(child.mode(), Mode::Native, "nearest wins");
    let err = parent.present_as(Mode::Both).unwrap_err();
    assert_eq!(
        err,
        RegisterError::ModeConflict {
            new: Mode::Both,
            old: Mode::Code
        }
    );
    assert!(handle.unregister());
    assert_eq!(parent.mode(), Mode::Native, "default restored");
    registry.set_mode(Mode::Both);
    assert_eq!(parent.mode(), Mode::Both);
}

#[tokio::test]
async fn scoped_guards_and_hooks_see_their_scope_and_descendants_only() {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let parent = registry.agent("p");
    let child = registry.agent_with_parent("c", &parent);
    let sibling = registry.agent("s");
    parent.guard(|view| Some(format!("parent guard saw {}", view.call_id)));
    let denied = registry
        .execute(call("1", "m", json!({})).with_agent(child.id().clone()))
        .await;
    assert_eq!(denied.error().unwrap().message, "parent guard saw 1");
    let free = registry
        .execute(call("2", "m", json!({})).with_agent(sibling.id().clone()))
        .await;
    assert!(!free.is_error());
    let global = registry.execute(call("3", "m", json!({}))).await;
    assert!(!global.is_error());
}

#[tokio::test]
async fn a_guard_added_by_a_scoped_hook_applies() {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let agent = registry.agent("a");
    let scope = agent.clone();
    agent.on_pre_execute(move |_view: Arc<ToolCallView>, next: PreNext| {
        scope.guard(|_| Some("installed by a hook".to_owned()));
        next.run()
    });
    // The guard list is snapshotted when a call starts, so the guard applies from the next call.
    let first = registry
        .execute(call("1", "m", json!({})).with_agent(agent.id().clone()))
        .await;
    assert!(!first.is_error());
    let second = registry
        .execute(call("2", "m", json!({})).with_agent(agent.id().clone()))
        .await;
    assert_eq!(second.error().unwrap().message, "installed by a hook");
}

#[test]
fn global_guards_run_before_scoped_ones() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let agent = registry.agent("a");
    agent.guard(|_| Some("scoped".to_owned()));
    registry.guard(|_| Some("global".to_owned()));
    let result =
        rt.block_on(registry.execute(call("1", "m", json!({})).with_agent(agent.id().clone())));
    assert_eq!(result.error().unwrap().message, "global");
}
