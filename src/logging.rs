//! Logging: logfmt (default) or JSON on stderr, filtered by `--log.level`.
//!
//! Secrets never reach a log line: header values are typed [`crate::config::Secret`] and print as
//! `<redacted>`, URLs are logged through [`crate::config::redact_url`], and wire errors strip URLs.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Logfmt,
    Json,
}

/// Install the global subscriber. `level` is `debug`, `info`, `warn` or `error`.
pub fn init(level: &str, format: Format) {
    let filter = EnvFilter::try_new(format!("{level},hyper=warn,reqwest=warn,h2=warn"))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        Format::Logfmt => registry
            .with(
                // No module path as `target=`: the key is ours, the probed target's name, and
                // a logfmt line with two `target` keys reads differently in every parser.
                // Span fields (a connection's target and index) are kept; the span's name and
                // path add nothing to them.
                tracing_logfmt::builder()
                    .with_target(false)
                    .with_span_name(false)
                    .with_span_path(false)
                    .layer()
                    .with_writer(std::io::stderr),
            )
            .init(),
        Format::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}
