//! Token counting: the tokenizer ctxlog uses (`ctxlog_projection::text_tokens`) beside
//! `tiktoken-rs` (the reference implementation of OpenAI's BPE in Rust) on every LoCoMo turn,
//! and the `bpe-openai` crate, in one run: the time a fresh process pays to build each tokenizer, counting throughput
//! (tokens/s) and whether every turn gets the same count.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin token_count [-- LOCOMO_JSON [--python RESULTS]]
//! cargo run --release -p ctxlog-bench --bin token_count -- --load ctxlog|tiktoken|bpe-openai o200k|cl100k
//! scripts/bench-tiktoken     # with Python tiktoken, in the same run
//! ```
//!
//! `--python RESULTS` adds Python `tiktoken`'s rows from the JSON that
//! `crates/bench/python/tiktoken_count.py` printed on the same turns (its per-turn counts are
//! compared with `tiktoken-rs`'s); `scripts/bench-tiktoken` runs both.
//!
//! `--load` builds one tokenizer, counts one word and exits: it is meant for `hyperfine`, to
//! time a whole process. LoCoMo is read from the path given, else `$CTXLOG_LOCOMO`, else
//! `../shared/data/locomo10.json` beside the repository (never copied into it).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use ctxlog_projection::Tokenizer;
use ctxlog_projection::tokens::text_tokens;
use serde_json::Value;

fn tiktoken(tokenizer: Tokenizer) -> &'static tiktoken_rs::CoreBPE {
    match tokenizer {
        Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
    }
}

fn bpe_openai(tokenizer: Tokenizer) -> &'static bpe_openai::Tokenizer {
    match tokenizer {
        Tokenizer::O200k => bpe_openai::o200k_base(),
        Tokenizer::Cl100k => bpe_openai::cl100k_base(),
    }
}

/// Every turn's text (and image caption) of the LoCoMo file, in file order.
fn locomo_texts(path: &str) -> Result<Vec<String>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let samples: Value = serde_json::from_slice(&bytes).context("LoCoMo is not JSON")?;
    let mut texts = Vec::new();
    for sample in samples.as_array().context("LoCoMo is not an array")? {
        let Some(conversation) = sample["conversation"].as_object() else {
            continue;
        };
        let mut sessions: Vec<(u64, &Vec<Value>)> = conversation
            .iter()
            .filter_map(|(k, v)| {
                let n = k.strip_prefix("session_")?.parse().ok()?;
                Some((n, v.as_array()?))
            })
            .collect();
        sessions.sort_by_key(|(n, _)| *n);
        for (_, turns) in sessions {
            for turn in turns {
                let mut text = turn["text"].as_str().unwrap_or_default().to_owned();
                if let Some(caption) = turn["blip_caption"].as_str() {
                    text.push_str(&format!(" [shares a photo: {caption}]"));
                }
                texts.push(text);
            }
        }
    }
    Ok(texts)
}

/// One side's count of `text`.
fn count(side: &str, tokenizer: Tokenizer, text: &str) -> Result<u64> {
    Ok(match side {
        "ctxlog" => text_tokens(tokenizer, text),
        "tiktoken" => tiktoken(tokenizer).encode_ordinary(text).len() as u64,
        "bpe-openai" => bpe_openai(tokenizer).count(text) as u64,
        other => bail!("unknown side {other:?} (ctxlog, tiktoken or bpe-openai)"),
    })
}

/// `--load SIDE TOKENIZER [LOCOMO]`: builds one tokenizer and counts one word (for
/// `hyperfine`), or every LoCoMo turn once, then prints the tokens and this process's peak
/// RSS in KiB (what [`own_peak_rss`] reads).
fn load_only(side: &str, tokenizer: &str, locomo: Option<&String>) -> Result<()> {
    let tokenizer: Tokenizer = tokenizer.parse()?;
    let n = match locomo {
        None => count(side, tokenizer, "hello")?,
        Some(path) => {
            let mut n = 0;
            for text in locomo_texts(path)? {
                n += count(side, tokenizer, &text)?;
            }
            n
        }
    };
    println!("{n} {}", ctxlog_bench::peak_rss_kib());
    Ok(())
}

/// The peak RSS (MiB) of a fresh process of this program that builds `side`'s `tokenizer`
/// and counts every turn of `locomo` once: each side measured alone.
fn own_peak_rss(side: &str, tokenizer: Tokenizer, locomo: &str) -> Result<f64> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["--load", side, &tokenizer.to_string(), locomo])
        .output()?;
    anyhow::ensure!(out.status.success(), "the {side} child failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse().ok())
        .with_context(|| format!("the {side} child printed {text:?}"))?;
    Ok(kib as f64 / 1024.0)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--load") {
        let (Some(side), Some(tokenizer)) = (args.get(1), args.get(2)) else {
            bail!(
                "usage: token_count --load ctxlog|tiktoken|bpe-openai o200k|cl100k [LOCOMO_JSON]"
            );
        };
        return load_only(side, tokenizer, args.get(3));
    }
    let mut path = None;
    let mut python = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--python" => python = Some(rest.next().context("--python needs a file")?.clone()),
            other if path.is_none() => path = Some(other.to_owned()),
            other => bail!("unexpected argument {other:?}"),
        }
    }
    let path = path.unwrap_or_else(|| {
        ctxlog_bench::default_locomo_path()
            .to_string_lossy()
            .into_owned()
    });
    let texts = locomo_texts(&path)?;
    let python: Option<Value> = python
        .map(|p| -> Result<Value> {
            let bytes = std::fs::read(&p).with_context(|| format!("reading {p}"))?;
            serde_json::from_slice(&bytes).with_context(|| format!("{p} is not JSON"))
        })
        .transpose()?;
    if let Some(py) = &python {
        anyhow::ensure!(
            py["turns"].as_u64() == Some(texts.len() as u64),
            "the Python results hold {} turns, LoCoMo {}",
            py["turns"],
            texts.len()
        );
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "token_count: {} LoCoMo turns, {bytes} bytes of text, each side counts every turn 5 times \
         (best of 5 reported)",
        texts.len()
    );
    println!();
    println!(
        "| tokenizer | side | first build (in process) | tokens | best pass | Mtokens/s | MB/s | turns counted as tiktoken-rs does | peak RSS (own process) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for tokenizer in Tokenizer::ALL {
        let start = Instant::now();
        text_tokens(tokenizer, "hello");
        let ours_build = start.elapsed();
        let start = Instant::now();
        tiktoken(tokenizer).encode_ordinary("hello");
        let theirs_build = start.elapsed();
        let start = Instant::now();
        bpe_openai(tokenizer).count("hello");
        let bpe_build = start.elapsed();

        let ours: Vec<u64> = texts.iter().map(|t| text_tokens(tokenizer, t)).collect();
        let theirs: Vec<u64> = texts
            .iter()
            .map(|t| tiktoken(tokenizer).encode_ordinary(t).len() as u64)
            .collect();
        let bpe_counts: Vec<u64> = texts
            .iter()
            .map(|t| bpe_openai(tokenizer).count(t.as_str()) as u64)
            .collect();
        let equal = ours.iter().zip(&theirs).filter(|(a, b)| a == b).count();
        let bpe_equal = bpe_counts
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a == b)
            .count();
        let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);

        let best = |f: &dyn Fn(&str) -> u64| {
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    let n: u64 = texts.iter().map(|t| f(t)).sum();
                    (start.elapsed(), n)
                })
                .min()
                .unwrap_or_default()
        };
        let (ours_time, ours_total) = best(&|t| text_tokens(tokenizer, t));
        let (theirs_time, theirs_total) =
            best(&|t| tiktoken(tokenizer).encode_ordinary(t).len() as u64);
        let (bpe_time, bpe_total) = best(&|t| bpe_openai(tokenizer).count(t) as u64);
        for (side, name, build, time, total, equal) in [
            (
                "ctxlog",
                "ctxlog (`text_tokens`)",
                ours_build,
                ours_time,
                ours_total,
                equal,
            ),
            (
                "tiktoken",
                "tiktoken-rs 0.12",
                theirs_build,
                theirs_time,
                theirs_total,
                texts.len(),
            ),
            (
                "bpe-openai",
                "bpe-openai 0.3",
                bpe_build,
                bpe_time,
                bpe_total,
                bpe_equal,
            ),
        ] {
            let secs = time.as_secs_f64();
            let rss = own_peak_rss(side, tokenizer, &path)?;
            println!(
                "| {tokenizer} | {name} | {:.1} ms | {total} | {:.1} ms | {:.2} | {:.1} | {equal}/{} | {rss:.1} MiB |",
                build.as_secs_f64() * 1e3,
                secs * 1e3,
                total as f64 / secs / 1e6,
                bytes as f64 / secs / 1e6,
                texts.len(),
            );
        }
        if let Some(py) = python
            .as_ref()
            .map(|p| &p["tokenizers"][tokenizer.to_string()])
        {
            let counts: Vec<u64> = py["counts"]
                .as_array()
                .context("Python results without counts")?
                .iter()
                .map(|c| c.as_u64().unwrap_or(u64::MAX))
                .collect();
            let py_equal = counts.iter().zip(&theirs).filter(|(a, b)| a == b).count();
            let ms = py["best_ms"].as_f64().unwrap_or(f64::NAN);
            let total = py["total"].as_u64().unwrap_or(0);
            let secs = ms / 1e3;
            println!(
                "| {tokenizer} | Python tiktoken {} | {:.1} ms | {total} | {ms:.1} ms | {:.2} | {:.1} | {py_equal}/{} | {:.1} MiB |",
                python
                    .as_ref()
                    .map_or(Value::Null, |p| p["tiktoken"].clone())
                    .as_str()
                    .unwrap_or("?"),
                py["build_ms"].as_f64().unwrap_or(f64::NAN),
                total as f64 / secs / 1e6,
                bytes as f64 / secs / 1e6,
                texts.len(),
                py["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
            );
        }
        if let Some(i) = first_diff {
            println!(
                "first difference at turn {i}: ctxlog {} vs tiktoken-rs {}: {:?}",
                ours[i], theirs[i], texts[i]
            );
        }
    }
    println!();
    println!(
        "(first build: the time the first count took in this process, tables built then; \
         throughput: the best of 5 passes over all turns, one thread; peak RSS of a Rust side: \
         a fresh process of this program that builds that tokenizer alone and counts every \
         turn once)"
    );
    if python.is_some() {
        println!(
            "(Python tiktoken: its own process, just before this one; first build includes \
             reading the BPE file; `encode_ordinary` per turn; its peak RSS is the process's \
             after o200k, then after both encodings)"
        );
    }
    Ok(())
}
