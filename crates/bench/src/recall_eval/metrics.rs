//! Latency percentiles, Markdown tables and the plain baseline's query.

use std::time::Duration;

/// Latency samples.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    samples: Vec<Duration>,
}

impl Latency {
    pub fn push(&mut self, d: Duration) {
        self.samples.push(d);
    }

    /// The `p`-th percentile in milliseconds (nearest rank).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        let mut v = self.samples.clone();
        v.sort_unstable();
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1].as_secs_f64() * 1000.0
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }
}

/// A Markdown table from a header and rows.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

pub fn f3(x: f64) -> String {
    format!("{x:.3}")
}

/// The plain FTS5 baseline's query (the data README's recipe): the text's distinct `\w+`
/// terms, each quoted, OR-ed together. Empty when the text has no such term.
pub fn baseline_query(text: &str) -> String {
    let mut terms: Vec<&str> = Vec::new();
    for w in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        if !terms.contains(&w) {
            terms.push(w);
        }
    }
    terms
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}
