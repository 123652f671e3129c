//! How long a stdio server is given to exit once the connection closes its stdin, before it is
//! killed: longer when it may still be sending its last spans.

use std::time::Duration;

/// How long a stdio server may take to exit after its stdin closes before it is killed.
const CHILD_EXIT_GRACE: Duration = Duration::from_secs(2);

/// [`CHILD_EXIT_GRACE`], or longer when this process's environment names an OTLP endpoint: a
/// server started from here inherits it and sends its last spans as it exits, which takes as
/// long as the receiver takes to take them ([`otlp_flush_bound`]); killed sooner, its spans
/// were lost. The wait ends as soon as the server exits.
///
/// [`otlp_flush_bound`]: dsh_tool_runtime::telemetry::otlp_flush_bound
pub(super) fn child_exit_grace() -> Duration {
    exit_grace(|name| std::env::var(name).ok())
}

/// [`child_exit_grace`] in an environment whose variables `var` reads.
fn exit_grace(var: impl Fn(&str) -> Option<String>) -> Duration {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    let exports = set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if !exports {
        return CHILD_EXIT_GRACE;
    }
    let flush = dsh_tool_runtime::telemetry::otlp_flush_bound(
        set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"),
        set("OTEL_EXPORTER_OTLP_TIMEOUT"),
    );
    CHILD_EXIT_GRACE.max(flush)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stdio server that exports spans is given as long to exit as its last export may
    /// take; one that does not, the usual grace.
    #[test]
    fn a_server_exporting_spans_is_given_time_to_send_them() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert_eq!(exit_grace(env(&[])), CHILD_EXIT_GRACE);
        // A timeout alone names no receiver.
        assert_eq!(
            exit_grace(env(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "120000")])),
            CHILD_EXIT_GRACE
        );
        assert_eq!(
            exit_grace(env(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:6006"
            )])),
            Duration::from_secs(20)
        );
        assert_eq!(
            exit_grace(env(&[
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://127.0.0.1:6006/v1/traces"
                ),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "120000"),
            ])),
            Duration::from_secs(240)
        );
        // A short export timeout never shortens the usual grace.
        assert_eq!(
            exit_grace(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "100"),
            ])),
            CHILD_EXIT_GRACE
        );
    }
}
