//! A `tracing` layer that keeps every span with its fields and its parent, for assertions.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Mutex;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One captured span.
#[derive(Clone, Debug)]
pub(crate) struct Span {
    /// Unique in one capture (tracing's ids are reused after a span closes).
    pub seq: u64,
    pub name: &'static str,
    pub parent: Option<u64>,
    pub fields: BTreeMap<String, String>,
}

impl Span {
    /// The field's value, as text.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// The spans seen so far.
#[derive(Clone)]
pub(crate) struct Capture {
    spans: Arc<Mutex<Vec<Span>>>,
    next: Arc<AtomicU64>,
}

struct Seq(u64);

impl Capture {
    /// A capture installed as this thread's default subscriber until the guard drops.
    pub(crate) fn install() -> (Capture, tracing::subscriber::DefaultGuard) {
        Capture::install_filtered(|_| true)
    }

    /// Likewise, of the spans `filter` lets through (a global filter: the spans it leaves out
    /// are disabled, as without a subscriber).
    pub(crate) fn install_filtered(
        filter: impl Fn(&tracing::Metadata<'_>) -> bool + Send + Sync + 'static,
    ) -> (Capture, tracing::subscriber::DefaultGuard) {
        let capture = Capture {
            spans: Arc::new(Mutex::new(Vec::new())),
            next: Arc::new(AtomicU64::new(1)),
        };
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::filter_fn(filter))
            .with(capture.clone());
        (capture, tracing::subscriber::set_default(subscriber))
    }

    /// Every span so far, in creation order.
    pub(crate) fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans named `name`.
    pub(crate) fn named(&self, name: &str) -> Vec<Span> {
        self.spans()
            .into_iter()
            .filter(|span| span.name == name)
            .collect()
    }

    /// The spans whose parent is `parent`.
    pub(crate) fn children(&self, parent: &Span) -> Vec<Span> {
        self.spans()
            .into_iter()
            .filter(|span| span.parent == Some(parent.seq))
            .collect()
    }

    /// The one `execute_tool` span of call `call_id`.
    pub(crate) fn call(&self, call_id: &str) -> Span {
        let mut found: Vec<Span> = self
            .named("execute_tool")
            .into_iter()
            .filter(|span| span.field("gen_ai.tool.call.id") == Some(call_id))
            .collect();
        assert_eq!(found.len(), 1, "one span for call {call_id}: {found:?}");
        found.remove(0)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let seq = self.next.fetch_add(1, Ordering::SeqCst);
        let parent = span
            .parent()
            .and_then(|parent| parent.extensions().get::<Seq>().map(|seq| seq.0));
        span.extensions_mut().insert(Seq(seq));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.spans.lock().unwrap().push(Span {
            seq,
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(seq) = ctx
            .span(id)
            .and_then(|span| span.extensions().get::<Seq>().map(|seq| seq.0))
        else {
            return;
        };
        let mut spans = self.spans.lock().unwrap();
        if let Some(span) = spans.iter_mut().find(|span| span.seq == seq) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}
