//! Recall@k accumulators, latency percentiles and Markdown tables.

use std::time::Duration;

/// The cut-offs reported.
pub const KS: [usize; 5] = [1, 5, 10, 20, 50];

/// Sums of recall@k over questions, per category (index 0 = all, 1..=5 = LoCoMo categories).
#[derive(Clone, Debug, Default)]
pub struct RecallTable {
    sums: [[f64; 5]; 6],
    counts: [usize; 6],
}

impl RecallTable {
    /// Adds one question: `ranked` are result ids best first, `evidence` the relevant ids.
    pub fn add<T: PartialEq>(&mut self, category: usize, ranked: &[T], evidence: &[T]) {
        for (i, k) in KS.iter().enumerate() {
            let top = &ranked[..ranked.len().min(*k)];
            let found = evidence.iter().filter(|e| top.contains(e)).count();
            let r = found as f64 / evidence.len() as f64;
            self.sums[0][i] += r;
            self.sums[category][i] += r;
        }
        self.counts[0] += 1;
        self.counts[category] += 1;
    }

    /// Mean recall@KS[i] in `category`.
    pub fn get(&self, category: usize, i: usize) -> f64 {
        if self.counts[category] == 0 {
            0.0
        } else {
            self.sums[category][i] / self.counts[category] as f64
        }
    }

    /// Questions counted in `category`.
    pub fn count(&self, category: usize) -> usize {
        self.counts[category]
    }
}

/// Latency samples, plus the time spent building the indexes they ran on.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    samples: Vec<Duration>,
    pub indexing: Duration,
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
