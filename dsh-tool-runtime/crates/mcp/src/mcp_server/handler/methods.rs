//! The protocol's methods rmcp dispatches to a session: its info, list changes and
//! `subscriptions/listen`, tools, resources, logging and tasks.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    ServerNotification, SetLevelRequestParams, SubscriptionFilter, Tool, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::McpHandler;
use crate::mcp_server::client::log_level;
use crate::registry::read;
use crate::telemetry;

/// `notifications/tools/list_changed`.
fn list_changed() -> ServerNotification {
    ServerNotification::ToolListChangedNotification(Default::default())
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_tasks()
            .build();
        let info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.options.server_name.clone(),
            env!("CARGO_PKG_VERSION"),
        ));
        match self.instructions() {
            Some(instructions) => info.with_instructions(instructions),
            None => info,
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let outbound = telemetry::Outbound::of_notification(&context);
        let peer = context.peer;
        let changes = self.list_changes(self.stop.clone(), None);
        // A list change is no request's doing: each notification's span is a root.
        tokio::spawn(changes(Box::new(move || {
            let (peer, outbound) = (peer.clone(), outbound.clone());
            Box::pin(async move {
                telemetry::notify(&peer, &outbound, list_changed())
                    .await
                    .is_ok()
            })
        })));
    }

    /// 2026-07-28 clients hear of list changes only on a `subscriptions/listen` stream.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        if accepted.tools_list_changed == Some(true) {
            let now = read(&self.registry.inner.state).changes.generation();
            let mut since = self.listen_since.lock();
            *since = Some(since.map_or(now, |since| since.min(now)));
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().tools_list_changed != Some(true) {
            // Nothing to send: the stream lasts until the client cancels it or, over stdio
            // (no HTTP request behind it), until input ends and `stop` is cancelled. An HTTP
            // client's stream is not tied to the session's handler.
            let over_stdio = context
                .request_context()
                .extensions
                .get::<http::request::Parts>()
                .is_none();
            tokio::select! {
                () = context.cancelled() => {}
                () = self.stop.cancelled(), if over_stdio => {}
            }
            return Ok(());
        }
        let stop = self.stop.child_token();
        let since = self.listen_since.lock().take();
        let changes = self.list_changes(stop.clone(), since);
        let sink = context.sink().clone();
        let outbound = telemetry::Outbound::of(context.request_context());
        // Under the stream's span, the notifications' spans.
        tokio::select! {
            () = changes(Box::new(move || {
                let (sink, outbound) = (sink.clone(), outbound.clone());
                Box::pin(async move {
                    telemetry::notify_listener(&sink, &outbound, list_changed())
                        .await
                        .is_ok()
                })
            })) => {}
            () = context.cancelled() => stop.cancel(),
        }
        Ok(())
    }

    /// The tool `name` as listed: rmcp checks a 2026-07-28 call's `Mcp-Param-*` headers
    /// against its `x-mcp-header` properties (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listing()
            .ok()?
            .tools
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listing = self.listing()?;
        let tools = &listing.tools;
        let start = match request.and_then(|request| request.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start < tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("unknown tools/list cursor \"{cursor}\""),
                        None,
                    )
                })?,
        };
        let end = (start + self.options.page_size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    /// A tool server serves no resources, so no URI names one: `resources/read` is the
    /// revision's "Resource not found" error with the URI in its data — `-32602` from
    /// 2026-07-28 (SEP-2164), `-32002` before — never an empty `contents`.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let data = Some(serde_json::json!({ "uri": request.uri }));
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        Err(if modern {
            ErrorData::invalid_params("Resource not found", data)
        } else {
            ErrorData::resource_not_found("Resource not found", data)
        })
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock() = Some(log_level(request.level));
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        #[cfg(feature = "restate")]
        if let Some(restate) = self.restate_task(&request.task_id) {
            return restate
                .get(&request.task_id, self.task_owner(&context).as_ref())
                .await;
        }
        self.tasks_of(&context).get(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks_of(&context)
            .update(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        #[cfg(feature = "restate")]
        if let Some(restate) = self.restate_task(&request.task_id) {
            return restate
                .cancel(&request.task_id, self.task_owner(&context).as_ref())
                .await;
        }
        self.tasks_of(&context).cancel(&request.task_id)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The request's span is `telemetry::Traced`'s, around every request the handler serves.
        self.serve_call(request, context).await
    }
}
