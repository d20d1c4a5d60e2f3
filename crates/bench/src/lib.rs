//! Benchmarks and evaluations for ctxlog. Each is a program under `src/bin/`, run in release
//! mode, that measures ctxlog beside the reference it competes with in one run and prints the
//! figures and their ratios. Results, with the command that produced them, are recorded in
//! `docs/benchmarks.md` (and `docs/recall.md` for retrieval quality).
//!
//! | program | measures |
//! |---|---|
//! | `commit_latency` | commit latency with per-commit fsync vs a plain write+fsync loop |
//! | `projection_bench` | projection time on a 10,000-turn conversation vs the naive suffix rule |
//! | `recall_eval` | retrieval quality (the §1 study, generators, LoCoMo, BEAM) vs plain FTS5 BM25 |
//! | `recall_scale` | recall index build and query latency at 10k–1M pages vs Python sqlite3 FTS5 |
//! | `http_load` | `ctxlog serve` requests per second and latency under 16 loopback clients |
//! | `gateway_latency` | the latency `ctxlog gateway` adds to a model call, beside the LiteLLM proxy |
//! | `cache_window` | the share of each body a prompt cache reuses, and its modelled cost, per window vs LangChain `trim_messages` |

use std::path::{Path, PathBuf};

use ctxlog_ledger::event::{Event, EventBody};
use serde_json::Value;

pub mod doc;
pub mod http;

/// The plots' label font: DejaVu Sans (Debian's `fonts-dejavu-core`), or the file
/// `$CTXLOG_PLOT_FONT` names.
const PLOT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Registers the plots' label font as `sans-serif`; `false` when the file is missing (the
/// plot is then drawn without text).
///
/// # Errors
///
/// The file is not a font plotters can read.
pub fn plot_font() -> anyhow::Result<bool> {
    let font = std::env::var("CTXLOG_PLOT_FONT").unwrap_or_else(|_| PLOT_FONT.to_owned());
    let Ok(bytes) = std::fs::read(&font) else {
        return Ok(false);
    };
    plotters::style::register_font(
        "sans-serif",
        plotters::style::FontStyle::Normal,
        bytes.leak(),
    )
    .map_err(|_| anyhow::anyhow!("{font} is not a font plotters can read"))?;
    Ok(true)
}

/// Where LoCoMo (`locomo10.json`) is read from when a program is not given a path:
/// `$CTXLOG_LOCOMO`, else `../shared/data/locomo10.json` beside the repository (the data set is
/// never copied into it).
pub fn default_locomo_path() -> PathBuf {
    std::env::var_os("CTXLOG_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared_data().join("locomo10.json"))
}

/// Where BEAM chats (`<n>/chat.json`, `<n>/probing_questions.json`) are read from when a program
/// is not given a path: `$CTXLOG_BEAM`, else `../shared/data/beam` beside the repository (the
/// data set is never copied into it).
pub fn default_beam_path() -> PathBuf {
    std::env::var_os("CTXLOG_BEAM")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared_data().join("beam"))
}

/// `../shared/data` beside the repository.
fn shared_data() -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repository = repository.canonicalize().unwrap_or(repository);
    repository.join("../shared/data")
}

/// This process's peak resident set size in KiB (`VmHWM` in `/proc/self/status`); 0 where
/// that file is missing (not Linux).
pub fn peak_rss_kib() -> u64 {
    peak_rss_kib_of("self")
}

/// The peak resident set size in KiB of process `pid` (a number, or `self`): `VmHWM` in
/// `/proc/PID/status`; 0 where that file is missing (not Linux, or the process is gone).
pub fn peak_rss_kib_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// [`peak_rss_kib`] in MiB.
pub fn peak_rss_mib() -> f64 {
    peak_rss_kib() as f64 / 1024.0
}

/// Resets this process's peak RSS to its current RSS (writes `5` to `/proc/self/clear_refs`,
/// Linux ≥ 4.0), so that [`peak_rss_kib`] afterwards measures only what follows. Returns
/// false where that is not possible; the peak then covers the whole process so far.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Runs `f` after [`reset_peak_rss`] and returns its result with the peak RSS (MiB) reached
/// while it ran (the whole process's, so other threads count too).
pub fn with_peak_rss<T>(f: impl FnOnce() -> T) -> (T, f64) {
    reset_peak_rss();
    let out = f();
    (out, peak_rss_mib())
}

/// A synthetic conversation of `turns` user/assistant turns (~100 bytes each, with quotes,
/// a newline, CJK and an emoji so every escape path of the wire formats is exercised), for the
/// projection benchmarks.
pub fn conversation(turns: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(turns * 2);
    for i in 0..turns {
        let user = format!(
            "Question {i:06}: what did we decide about the \"deployment window\" for the gateway? 中文"
        );
        let assistant = format!(
            "Answer {i:06}: the window is Tuesday 02:00-04:00 UTC,\nrollback by 04:30 at the latest 😀"
        );
        for body in [
            EventBody::User {
                text: user,
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: assistant,
                provider_item: None,
            },
        ] {
            events.push(Event {
                seq: events.len() as u64 + 1,
                ts_ms: 0,
                body,
            });
        }
    }
    events
}

/// One LoCoMo sample's turns in order (its `session_N` lists, sessions by number) as ledger
/// events: the first speaker's turns as `user`, the other's as `assistant`, the image caption
/// appended as ` [shares a photo: …]`; seqs from 1, time 0. Beside each event, its turn's
/// `dia_id` (what the sample's questions name as evidence).
pub fn locomo_events(sample: &Value) -> Vec<(Event, String)> {
    let conv = &sample["conversation"];
    let first = conv["speaker_a"].as_str().unwrap_or_default();
    let mut sessions: Vec<(u64, &Vec<Value>)> = conv
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.strip_prefix("session_")?.parse().ok()?, v.as_array()?)))
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    let mut out = Vec::new();
    for turn in sessions.into_iter().flat_map(|(_, turns)| turns) {
        let mut text = turn["text"].as_str().unwrap_or_default().to_owned();
        if let Some(c) = turn["blip_caption"].as_str() {
            text.push_str(&format!(" [shares a photo: {c}]"));
        }
        let body = if turn["speaker"].as_str() == Some(first) {
            EventBody::user(text)
        } else {
            EventBody::assistant(text)
        };
        let event = Event {
            seq: out.len() as u64 + 1,
            ts_ms: 0,
            body,
        };
        out.push((
            event,
            turn["dia_id"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    out
}
