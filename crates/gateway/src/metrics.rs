//! The gateway's counters and latencies, served at `GET /metrics`.
//!
//! # Format
//!
//! The Prometheus text exposition format (version 0.0.4), one family per block with its
//! `# HELP` and `# TYPE` lines; every series is labelled with the route (`chat`,
//! `responses`, `messages`):
//!
//! * `ctxlog_gateway_requests_total{route,status}`: requests answered, by HTTP status;
//! * `ctxlog_gateway_refused_total{route}`: requests the gateway refused before calling the
//!   provider (its own 4xx: a bad body, no key, a conflict, over the window);
//! * `ctxlog_gateway_upstream_errors_total{route,class}`: provider calls that failed, by class
//!   (`status_4xx`, `status_5xx`, `unreachable`, `timeout`, `broken`: a body or stream that
//!   broke off);
//! * `ctxlog_gateway_upstream_input_tokens_total{route}`: the input tokens sent upstream (the
//!   projected bodies, by ctxlog's count);
//! * `ctxlog_gateway_client_tokens_total{route}`: the tokens of the request bodies clients
//!   sent (their whole resent history), by the same count, made off the request's path;
//! * `ctxlog_gateway_client_bytes_total{route}` and `ctxlog_gateway_upstream_bytes_total{route}`:
//!   the request bytes clients sent (their whole resent history) and the bytes sent
//!   upstream in their place;
//! * `ctxlog_gateway_recall_calls_total{route}`: the model's calls of the recall tool the
//!   gateway answered itself (`--recall-tool`);
//! * `ctxlog_gateway_added_seconds{route}`: a histogram of the time the gateway adds to a call:
//!   from the request's arrival to the provider call (recognition, commits, projection), plus,
//!   for a whole answer, from the provider's last byte to the reply committed.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::provider::Provider;

/// The histogram's upper bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// How a provider call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum UpstreamError {
    Status4xx,
    Status5xx,
    Unreachable,
    Timeout,
    Broken,
}

impl UpstreamError {
    fn label(self) -> &'static str {
        match self {
            UpstreamError::Status4xx => "status_4xx",
            UpstreamError::Status5xx => "status_5xx",
            UpstreamError::Unreachable => "unreachable",
            UpstreamError::Timeout => "timeout",
            UpstreamError::Broken => "broken",
        }
    }
}

/// One route's figures.
#[derive(Debug, Default)]
struct Route {
    statuses: Mutex<std::collections::BTreeMap<u16, u64>>,
    refused: AtomicU64,
    errors: Mutex<std::collections::BTreeMap<UpstreamError, u64>>,
    tokens: AtomicU64,
    client_bytes: AtomicU64,
    upstream_bytes: AtomicU64,
    recall_calls: AtomicU64,
    client_tokens: AtomicU64,
    /// Per bucket of [`BUCKETS`], and one for +Inf.
    added: [AtomicU64; BUCKETS.len() + 1],
    added_sum_us: AtomicU64,
}

/// The gateway's figures since it started.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    routes: [Route; 3],
}

fn index(provider: Provider) -> usize {
    match provider {
        Provider::OpenAiChat => 0,
        Provider::OpenAiResponses => 1,
        Provider::Anthropic => 2,
    }
}

const ROUTES: [&str; 3] = ["chat", "responses", "messages"];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Metrics {
    fn route(&self, provider: Provider) -> &Route {
        &self.routes[index(provider)]
    }

    /// A request answered with `status`; `refused` when the gateway refused it itself.
    pub(crate) fn answered(&self, provider: Provider, status: u16, refused: bool) {
        let route = self.route(provider);
        *lock(&route.statuses).entry(status).or_default() += 1;
        if refused {
            route.refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A provider call that failed.
    pub(crate) fn upstream_error(&self, provider: Provider, class: UpstreamError) {
        *lock(&self.route(provider).errors).entry(class).or_default() += 1;
    }

    /// A call sent upstream: its client body's bytes, the projected body's bytes and tokens.
    pub(crate) fn sent(&self, provider: Provider, client: usize, upstream: usize, tokens: u64) {
        let route = self.route(provider);
        route
            .client_bytes
            .fetch_add(client as u64, Ordering::Relaxed);
        route
            .upstream_bytes
            .fetch_add(upstream as u64, Ordering::Relaxed);
        route.tokens.fetch_add(tokens, Ordering::Relaxed);
    }

    /// The tokens of a client's body.
    pub(crate) fn resent(&self, provider: Provider, tokens: u64) {
        let route = self.route(provider);
        route.client_tokens.fetch_add(tokens, Ordering::Relaxed);
    }

    /// Recall calls the gateway answered.
    pub(crate) fn recalled(&self, provider: Provider, calls: usize) {
        let route = self.route(provider);
        route
            .recall_calls
            .fetch_add(calls as u64, Ordering::Relaxed);
    }

    /// Time the gateway added to a call.
    pub(crate) fn added(&self, provider: Provider, time: Duration) {
        let route = self.route(provider);
        let seconds = time.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        route.added[bucket].fetch_add(1, Ordering::Relaxed);
        route
            .added_sum_us
            .fetch_add(time.as_micros() as u64, Ordering::Relaxed);
    }

    /// The text exposition of every figure (see the module's format).
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.labeled(
            &mut out,
            (
                "ctxlog_gateway_requests_total",
                "Requests answered, by HTTP status.",
            ),
            "status",
            |r| {
                let statuses = lock(&r.statuses);
                statuses.iter().map(|(s, n)| (s.to_string(), *n)).collect()
            },
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_refused_total",
            "Requests refused before the provider was called.",
            |r| &r.refused,
        );
        self.labeled(
            &mut out,
            (
                "ctxlog_gateway_upstream_errors_total",
                "Provider calls that failed, by class.",
            ),
            "class",
            |r| {
                let errors = lock(&r.errors);
                errors
                    .iter()
                    .map(|(c, n)| (c.label().to_owned(), *n))
                    .collect()
            },
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_upstream_input_tokens_total",
            "Input tokens sent upstream (the projected bodies, by ctxlog's count).",
            |r| &r.tokens,
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_client_tokens_total",
            "Tokens of the request bodies clients sent (their resent history), by the same count.",
            |r| &r.client_tokens,
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_client_bytes_total",
            "Request body bytes clients sent (their resent history).",
            |r| &r.client_bytes,
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_upstream_bytes_total",
            "Body bytes sent upstream in their place.",
            |r| &r.upstream_bytes,
        );
        self.counter(
            &mut out,
            "ctxlog_gateway_recall_calls_total",
            "Recall tool calls the gateway answered itself.",
            |r| &r.recall_calls,
        );
        self.histogram(&mut out);
        out
    }

    /// A counter's `# HELP` and `# TYPE` lines, then its value per route.
    fn counter(
        &self,
        out: &mut String,
        name: &str,
        help: &str,
        field: impl Fn(&Route) -> &AtomicU64,
    ) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (label, route) in ROUTES.iter().zip(&self.routes) {
            let n = field(route).load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{route=\"{label}\"}} {n}");
        }
    }

    /// A counter kept per route and per value of one more label, `key` (`rows`: each value
    /// and its count), with its `# HELP` and `# TYPE` lines.
    fn labeled(
        &self,
        out: &mut String,
        (name, help): (&str, &str),
        key: &str,
        rows: impl Fn(&Route) -> Vec<(String, u64)>,
    ) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (label, route) in ROUTES.iter().zip(&self.routes) {
            for (value, n) in rows(route) {
                let _ = writeln!(out, "{name}{{route=\"{label}\",{key}=\"{value}\"}} {n}");
            }
        }
    }

    fn histogram(&self, out: &mut String) {
        let name = "ctxlog_gateway_added_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time the gateway added to a call (before the provider call, and \
             after a whole answer).\n# TYPE {name} histogram"
        );
        for (label, route) in ROUTES.iter().zip(&self.routes) {
            let mut total = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                total += route.added[i].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "{name}_bucket{{route=\"{label}\",le=\"{bound}\"}} {total}"
                );
            }
            total += route.added[BUCKETS.len()].load(Ordering::Relaxed);
            let sum = route.added_sum_us.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "{name}_bucket{{route=\"{label}\",le=\"+Inf\"}} {total}\n\
                 {name}_sum{{route=\"{label}\"}} {sum}\n{name}_count{{route=\"{label}\"}} {total}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_has_each_family_and_cumulative_buckets() {
        let m = Metrics::default();
        m.answered(Provider::OpenAiChat, 200, false);
        m.answered(Provider::OpenAiChat, 409, true);
        m.upstream_error(Provider::Anthropic, UpstreamError::Timeout);
        m.sent(Provider::OpenAiChat, 5000, 1200, 300);
        m.added(Provider::OpenAiChat, Duration::from_micros(700));
        m.added(Provider::OpenAiChat, Duration::from_secs(9));
        m.recalled(Provider::Anthropic, 2);
        m.resent(Provider::OpenAiChat, 1400);
        let text = m.render();
        for line in [
            "ctxlog_gateway_requests_total{route=\"chat\",status=\"200\"} 1",
            "ctxlog_gateway_requests_total{route=\"chat\",status=\"409\"} 1",
            "ctxlog_gateway_refused_total{route=\"chat\"} 1",
            "ctxlog_gateway_upstream_errors_total{route=\"messages\",class=\"timeout\"} 1",
            "ctxlog_gateway_upstream_input_tokens_total{route=\"chat\"} 300",
            "ctxlog_gateway_client_bytes_total{route=\"chat\"} 5000",
            "ctxlog_gateway_upstream_bytes_total{route=\"chat\"} 1200",
            "ctxlog_gateway_recall_calls_total{route=\"messages\"} 2",
            "ctxlog_gateway_client_tokens_total{route=\"chat\"} 1400",
            "ctxlog_gateway_added_seconds_bucket{route=\"chat\",le=\"0.0005\"} 0",
            "ctxlog_gateway_added_seconds_bucket{route=\"chat\",le=\"0.001\"} 1",
            "ctxlog_gateway_added_seconds_bucket{route=\"chat\",le=\"5\"} 1",
            "ctxlog_gateway_added_seconds_bucket{route=\"chat\",le=\"+Inf\"} 2",
            "ctxlog_gateway_added_seconds_count{route=\"chat\"} 2",
            "# TYPE ctxlog_gateway_added_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
