//! Our client's answers to a server's elicitation requests (`elicitation/create`, form mode), through
//! the handler the host gave [`McpServer::on_elicitation`](super::McpServer::on_elicitation):
//! as a request on 2025 sessions, as one of the `inputRequests` of an `input_required` result on
//! 2026-07-28 ones.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

use crate::call::{Elicitation, ElicitationRequest};

/// The host's elicitation handler, as stored.
#[derive(Clone)]
pub(crate) struct ElicitationHandler(
    pub(crate) Arc<dyn Fn(ElicitationRequest) -> BoxFuture<'static, Elicitation> + Send + Sync>,
);

impl fmt::Debug for ElicitationHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ElicitationHandler")
    }
}

impl ElicitationHandler {
    /// Asks the host's person: a form request goes to the handler, and an accepted answer gets
    /// the schema's `default` for every property it leaves out (SEP-1034); a URL-mode request
    /// (which needs a browser, not a form) is declined.
    pub(crate) async fn answer(&self, params: ElicitRequestParams) -> ElicitResult {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = params
        else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        match (self.0)(ElicitationRequest::new(message, schema.clone())).await {
            Elicitation::Accept(mut values) => {
                with_defaults(&schema, &mut values);
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(values))
            }
            Elicitation::Decline => ElicitResult::new(ElicitationAction::Decline),
            Elicitation::Cancel => ElicitResult::new(ElicitationAction::Cancel),
            // An answer kind this version does not know: nothing was accepted.
            _ => ElicitResult::new(ElicitationAction::Decline),
        }
    }
}

/// Fills in, for every property of `schema` that `values` lacks, the property's `default`.
fn with_defaults(schema: &Value, values: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !values.contains_key(name)
        {
            values.insert(name.clone(), default.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_properties_get_their_defaults_and_answers_stay() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "nick": {"type": "string"},
        }});
        let mut values = Map::new();
        values.insert("age".into(), json!(41));
        with_defaults(&schema, &mut values);
        assert_eq!(
            Value::Object(values),
            json!({"name": "John Doe", "age": 41})
        );
    }
}
