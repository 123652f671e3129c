//! An MCP server handler with a `SERVER` span around every request and notification it
//! handles (see [`crate::telemetry`] for the names and attributes).
//!
//! [`Traced`] implements every method of [`ServerHandler`] by calling its inner handler's in
//! the method's span, so the handler's own work (the pipeline's spans among it) is the span's
//! child, and the span the child of the trace context in the request's `_meta`. rmcp's
//! streamable HTTP service takes a [`ServerHandler`], not any service, hence a handler here.

use std::borrow::Cow;
use std::future::Future;

use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CancelTaskMethod,
    CancelTaskParams, CancelledNotificationMethod, CancelledNotificationParam,
    CompleteRequestMethod, CompleteRequestParams, CompleteResult, ConstString, CustomNotification,
    CustomRequest, CustomResult, DiscoverRequestMethod, DiscoverResult, Extensions,
    GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse, GetSkillRequestMethod,
    GetSkillRequestParams, GetSkillResult, GetTaskMethod, GetTaskParams, GetTaskResult,
    InitializeRequestParams, InitializeResult, InitializeResultMethod,
    InitializedNotificationMethod, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod,
    ListResourcesResult, ListSkillsRequestMethod, ListSkillsResult, ListToolsRequestMethod,
    ListToolsResult, PaginatedRequestParams, PingRequestMethod, ProgressNotificationMethod,
    ProgressNotificationParam, ProtocolVersion, ReadResourceDirectoryRequestMethod,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestMethod,
    ReadResourceRequestParams, ReadResourceResponse, RootsListChangedNotificationMethod,
    ServerConfig, SetLevelRequestMethod, SubscribeRequestMethod, SubscribeRequestParams,
    SubscriptionFilter, SubscriptionsListenRequestMethod, Tool, UnsubscribeRequestMethod,
    UnsubscribeRequestParams, UpdateTaskMethod, UpdateTaskParams,
};
// `logging/setLevel` is deprecated (SEP-2577) and still served while clients send it.
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tracing::{Instrument, Span};

use crate::telemetry::{
    Served, Session, TOOL_ERROR, extract, failed, http_version, record_prompt, record_resource,
    server_span,
};

/// A server handler whose every request and notification is a `SERVER` span.
pub(crate) struct Traced<H> {
    inner: H,
    /// `network.transport`: [`crate::telemetry::PIPE`] or [`crate::telemetry::TCP`].
    transport: &'static str,
    /// The session this handler serves (one per stdio process or streamable HTTP session; a
    /// stateless request's handler serves none), reported when the handler is dropped.
    session: parking_lot::Mutex<Session>,
}

impl<H: ServerHandler> Traced<H> {
    pub(crate) fn new(inner: H, transport: &'static str) -> Self {
        Traced {
            inner,
            transport,
            session: parking_lot::Mutex::new(Session::start(transport)),
        }
    }

    /// The span of `method` (`tool`: the tool a `tools/call` calls) for a message with
    /// `extensions` (an HTTP request's `Parts` among them).
    fn span(
        &self,
        method: &str,
        tool: Option<&str>,
        extensions: &Extensions,
        request_id: Option<String>,
        protocol_version: Option<String>,
    ) -> Span {
        let parts = extensions.get::<http::request::Parts>();
        server_span(
            method,
            tool,
            &Served {
                request_id,
                protocol_version,
                session: parts
                    .and_then(|parts| parts.headers.get("mcp-session-id"))
                    .and_then(|value| value.to_str().ok()),
                transport: self.transport,
                http_version: parts.and_then(|parts| http_version(parts.version)),
            },
        )
    }

    /// The span of a request, under the trace context of its `_meta`.
    fn request(
        &self,
        method: &str,
        tool: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Span {
        let version = context
            .protocol_version()
            .map(|version| version.to_string());
        self.session.lock().exchanged(version.as_deref());
        let span = self.span(
            method,
            tool,
            &context.extensions,
            Some(context.id.to_string()),
            version,
        );
        extract(&span, &context.meta.0);
        span
    }

    /// The span of a notification, under the trace context of its `_meta`.
    fn notification(&self, method: &str, context: &NotificationContext<RoleServer>) -> Span {
        let version = context
            .peer
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        let span = self.span(method, None, &context.extensions, None, version);
        extract(&span, &context.meta.0);
        span
    }
}

/// Runs `answer` in `span` and records a JSON-RPC error on it.
async fn answered<T>(
    span: Span,
    answer: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let answer = answer.instrument(span.clone()).await;
    if let Err(error) = &answer {
        failed(&span, None, Some(error.code.0), &error.message);
    }
    answer
}

/// Requests whose handler method takes `(params, context)`: the method, its params and result
/// types, and the `mcp.method.name` constant.
macro_rules! traced_requests {
    ($($name:ident($params:ty) -> $result:ty = $method:ty;)*) => {$(
        async fn $name(
            &self,
            request: $params,
            context: RequestContext<RoleServer>,
        ) -> Result<$result, ErrorData> {
            let span = self.request(<$method>::VALUE, None, &context);
            answered(span, self.inner.$name(request, context)).await
        }
    )*};
}

/// Notifications whose handler method takes `(params, context)`, likewise.
macro_rules! traced_notifications {
    ($($name:ident($($params:ty)?) = $method:ty;)*) => {$(
        async fn $name(
            &self,
            $(notification: $params,)?
            context: NotificationContext<RoleServer>,
        ) {
            let span = self.notification(<$method>::VALUE, &context);
            self.inner
                .$name($(traced_notifications!(@arg notification $params),)? context)
                .instrument(span)
                .await
        }
    )*};
    (@arg $arg:ident $params:ty) => { $arg };
}

/// The handler's session ended (its process's stdin, its HTTP session closed): it is reported,
/// if it had one.
impl<H> Drop for Traced<H> {
    fn drop(&mut self) {
        self.session.get_mut().server_ended();
    }
}

impl<H: ServerHandler> ServerHandler for Traced<H> {
    traced_requests! {
        complete(CompleteRequestParams) -> CompleteResult = CompleteRequestMethod;
        list_prompts(Option<PaginatedRequestParams>) -> ListPromptsResult = ListPromptsRequestMethod;
        list_resources(Option<PaginatedRequestParams>) -> ListResourcesResult
            = ListResourcesRequestMethod;
        list_resource_templates(Option<PaginatedRequestParams>) -> ListResourceTemplatesResult
            = ListResourceTemplatesRequestMethod;
        list_tools(Option<PaginatedRequestParams>) -> ListToolsResult = ListToolsRequestMethod;
        get_task(GetTaskParams) -> GetTaskResult = GetTaskMethod;
        update_task(UpdateTaskParams) -> () = UpdateTaskMethod;
        cancel_task(CancelTaskParams) -> () = CancelTaskMethod;
        list_skills(Option<PaginatedRequestParams>) -> ListSkillsResult = ListSkillsRequestMethod;
        get_skill(GetSkillRequestParams) -> GetSkillResult = GetSkillRequestMethod;
        read_resource_directory(ReadResourceDirectoryRequestParams) -> ReadResourceDirectoryResult
            = ReadResourceDirectoryRequestMethod;
    }

    traced_notifications! {
        on_cancelled(CancelledNotificationParam) = CancelledNotificationMethod;
        on_progress(ProgressNotificationParam) = ProgressNotificationMethod;
        on_initialized() = InitializedNotificationMethod;
        on_roots_list_changed() = RootsListChangedNotificationMethod;
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The version is the one agreed on, in the answer (not one the request's `_meta` names).
        let span = self.span(
            InitializeResultMethod::VALUE,
            None,
            &context.extensions,
            Some(context.id.to_string()),
            None,
        );
        extract(&span, &context.meta.0);
        let http = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| http_version(parts.version));
        let answer = answered(span.clone(), self.inner.initialize(request, context)).await;
        if let Ok(result) = &answer {
            let version = result.protocol_version.to_string();
            span.record("mcp.protocol.version", version.as_str());
            self.session.lock().initialized(version, http);
        }
        answer
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = self.request(GetPromptRequestMethod::VALUE, None, &context);
        record_prompt(&span, GetPromptRequestMethod::VALUE, &request.name);
        answered(span, self.inner.get_prompt(request, context)).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let span = self.request(ReadResourceRequestMethod::VALUE, None, &context);
        record_resource(&span, &request.uri);
        answered(span, self.inner.read_resource(request, context)).await
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let span = self.request(PingRequestMethod::VALUE, None, &context);
        answered(span, self.inner.ping(context)).await
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let span = self.request(DiscoverRequestMethod::VALUE, None, &context);
        answered(span, self.inner.discover(context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = self.request(CallToolRequestMethod::VALUE, Some(&request.name), &context);
        let answer = answered(span.clone(), self.inner.call_tool(request, context)).await;
        if let Ok(CallToolResponse::Complete(result)) = &answer
            && result.is_error == Some(true)
        {
            failed(&span, Some(TOOL_ERROR), None, "isError");
        }
        answer
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let span = self.request(
            SubscriptionsListenRequestMethod::VALUE,
            None,
            context.request_context(),
        );
        answered(span, self.inner.listen(context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = self.request(SetLevelRequestMethod::VALUE, None, &context);
        answered(span, self.inner.set_level(request, context)).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = self.request(SubscribeRequestMethod::VALUE, None, &context);
        record_resource(&span, &request.uri);
        answered(span, self.inner.subscribe(request, context)).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = self.request(UnsubscribeRequestMethod::VALUE, None, &context);
        record_resource(&span, &request.uri);
        answered(span, self.inner.unsubscribe(request, context)).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let span = self.request(&request.method, None, &context);
        if let Some(why) = malformed(&request) {
            return answered(span, async { Err(why) }).await;
        }
        answered(span, self.inner.on_custom_request(request, context)).await
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        let span = self.notification(&notification.method, &context);
        self.inner
            .on_custom_notification(notification, context)
            .instrument(span)
            .await
    }

    fn negotiate_initialize(
        &self,
        request: &InitializeRequestParams,
    ) -> Result<InitializeResult, ErrorData> {
        self.inner.negotiate_initialize(request)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.inner.accepted_subscription_filter(requested)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }
}

/// A request of a method of the protocol whose `params` do not parse as that method's (rmcp
/// then hands it over as a custom request, which would be answered "method not found"): the
/// JSON-RPC 2.0 answer is `-32602 Invalid params`, saying what is wrong. `None` for a method
/// the protocol does not have, or one 2026-07-28 removed (`initialize`, `ping`,
/// `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`): a stateless request of
/// one is answered -32601, as that revision has it.
fn malformed(request: &CustomRequest) -> Option<ErrorData> {
    fn why<P: serde::de::DeserializeOwned>(request: &CustomRequest, required: bool) -> String {
        match &request.params {
            None if required => "params are missing".to_owned(),
            None => "params do not match the method".to_owned(),
            Some(params) => match serde_json::from_value::<P>(params.clone()) {
                Err(error) => error.to_string(),
                Ok(_) => "params do not match the method".to_owned(),
            },
        }
    }
    let method = request.method.as_str();
    let reason = match method {
        CallToolRequestMethod::VALUE => why::<CallToolRequestParams>(request, true),
        GetPromptRequestMethod::VALUE => why::<GetPromptRequestParams>(request, true),
        ReadResourceRequestMethod::VALUE => why::<ReadResourceRequestParams>(request, true),
        CompleteRequestMethod::VALUE => why::<CompleteRequestParams>(request, true),
        GetTaskMethod::VALUE => why::<GetTaskParams>(request, true),
        UpdateTaskMethod::VALUE => why::<UpdateTaskParams>(request, true),
        CancelTaskMethod::VALUE => why::<CancelTaskParams>(request, true),
        GetSkillRequestMethod::VALUE => why::<GetSkillRequestParams>(request, true),
        ReadResourceDirectoryRequestMethod::VALUE => {
            why::<ReadResourceDirectoryRequestParams>(request, true)
        }
        ListToolsRequestMethod::VALUE
        | ListPromptsRequestMethod::VALUE
        | ListResourcesRequestMethod::VALUE
        | ListResourceTemplatesRequestMethod::VALUE
        | ListSkillsRequestMethod::VALUE => why::<PaginatedRequestParams>(request, false),
        DiscoverRequestMethod::VALUE | SubscriptionsListenRequestMethod::VALUE => {
            "params do not match the method".to_owned()
        }
        _ => return None,
    };
    Some(ErrorData::invalid_params(
        format!("Invalid params for {method}: {reason}"),
        None,
    ))
}

#[cfg(test)]
mod malformed_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_protocol_method_with_unparsable_params_is_invalid_params() {
        let request = CustomRequest::new(
            "tools/call",
            Some(json!({"name": "x", "arguments": "notanobject"})),
        );
        let error = malformed(&request).unwrap();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            error.message.starts_with("Invalid params for tools/call: "),
            "{error:?}"
        );
        assert!(error.message.contains("invalid type"), "{error:?}");
        let missing = malformed(&CustomRequest::new("resources/read", None)).unwrap();
        assert!(
            missing.message.contains("params are missing"),
            "{missing:?}"
        );
        assert!(malformed(&CustomRequest::new("acme/custom", Some(json!({})))).is_none());
    }
}
