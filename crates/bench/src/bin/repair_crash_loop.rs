//! Repair crash loop (docs/design.md#l11-repair): SIGKILL `ctxlog repair CONV --accept-loss`
//! at random moments and check after every kill that the conversation is either
//!
//! * the damaged original (`ledger.log` byte for byte as it was damaged), or
//! * the repaired ledger: `verify` exits 0, every record the dry run's plan kept reads exactly
//!   as before the damage, and the lost seqs are covered by exactly the planned loss records;
//!
//! never a mix, and that a repair run to its end after the kill gives the repaired ledger.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin repair_crash_loop -- --rounds 400 [--ctxlog PATH] [--seed N]
//! ```
//!
//! Each round copies a template conversation (40 commits with ids, some with a tool result
//! large enough to be an artifact), damages it at random (a flipped byte in a random record,
//! or the log cut inside a random record), plans with a dry run, then runs the repair and
//! kills it. `crates/cli/tests/repair_crash_loop.rs` runs a short loop in CI with the same
//! code. Exits 1 if any check failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
#[path = "../rng.rs"]
mod rng;
use rng::XorShift as Rng;
use serde_json::Value;

/// What a loop is asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `ctxlog` binary.
    pub ctxlog: PathBuf,
    /// Rounds (one damaged copy and one possibly killed repair each).
    pub rounds: u64,
    /// Seed of the damage and the kill schedule.
    pub seed: u64,
}

/// What a loop measured.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub rounds: u64,
    /// Repairs still running when SIGKILL arrived.
    pub kills: u64,
    /// Kills after which the damaged original was found.
    pub left_original: u64,
    /// Kills after which the repaired ledger was found.
    pub left_repaired: u64,
    /// Intact records checked present after a repair (summed).
    pub kept_checked: u64,
    /// Intact records a repair lost (must stay 0).
    pub intact_lost: u64,
    pub failures: Vec<String>,
}

/// Runs the loop in a fresh temporary directory.
pub fn run(cfg: &Config) -> Result<Summary> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "ctxlog-repair-crash-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    let result = Loop::new(cfg, dir.clone()).and_then(|mut l| {
        l.all_rounds()?;
        Ok(l.summary)
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

struct Loop<'a> {
    cfg: &'a Config,
    dir: PathBuf,
    rng: Rng,
    /// The template conversation's files (relative path → bytes).
    template: BTreeMap<PathBuf, Vec<u8>>,
    /// `log --json` of the undamaged template, line by seq.
    baseline: BTreeMap<u64, Value>,
    /// `(offset, length)` of every record of the template's log.
    records: Vec<(usize, usize)>,
    typical: Duration,
    summary: Summary,
}

const CONV: &str = "chat";

impl<'a> Loop<'a> {
    fn new(cfg: &'a Config, dir: PathBuf) -> Result<Loop<'a>> {
        let mut l = Loop {
            cfg,
            dir,
            rng: Rng(cfg.seed.max(1)),
            template: BTreeMap::new(),
            baseline: BTreeMap::new(),
            records: Vec::new(),
            typical: Duration::from_millis(20),
            summary: Summary::default(),
        };
        l.build_template()?;
        Ok(l)
    }

    fn root(&self) -> PathBuf {
        self.dir.join("store")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.cfg.ctxlog);
        c.arg("--root")
            .arg(self.root())
            .args(args)
            .env_remove("CTXLOG_ROOT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn run_to_end(&self, args: &[&str]) -> Result<(i32, Vec<u8>, String)> {
        let out = self.command(args).output()?;
        Ok((
            out.status.code().unwrap_or(-1),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    fn build_template(&mut self) -> Result<()> {
        for i in 0..40 {
            let turn = if i % 7 == 3 {
                serde_json::json!({"events": [
                    {"kind": "user", "text": format!("run job {i}")},
                    {"kind": "tool_call", "call_id": "c1", "tool": "sh", "arguments": {"n": i}},
                    {"kind": "tool_result", "call_id": "c1", "tool": "sh", "status": "ok",
                     "text": format!("output line {i}\n").repeat(1_500)},
                    {"kind": "assistant", "text": format!("job {i} done")},
                ]})
            } else {
                serde_json::json!({"user": format!("question {i}"), "assistant": format!("answer {i}")})
            };
            let mut child = self
                .command(&["commit", CONV, "--id", &format!("t{i}")])
                .stdin(Stdio::piped())
                .spawn()?;
            if let Some(mut s) = child.stdin.take() {
                use std::io::Write;
                s.write_all(turn.to_string().as_bytes())?;
            }
            if !child.wait()?.success() {
                bail!("template commit {i} failed");
            }
        }
        self.baseline = self.log_lines()?.context("template log")?;
        let conv = self.root().join(CONV);
        self.template = read_tree(&conv)?;
        let log = &self.template[Path::new("ledger.log")];
        self.records = record_spans(log);
        Ok(())
    }

    /// `log --json` by seq, or `None` when it fails.
    fn log_lines(&self) -> Result<Option<BTreeMap<u64, Value>>> {
        let (code, stdout, _) = self.run_to_end(&["log", CONV, "--json"])?;
        if code != 0 {
            return Ok(None);
        }
        let mut out = BTreeMap::new();
        for line in String::from_utf8_lossy(&stdout).lines() {
            let v: Value = serde_json::from_str(line)?;
            out.insert(v["seq"].as_u64().context("seq")?, v);
        }
        Ok(Some(out))
    }

    fn all_rounds(&mut self) -> Result<()> {
        for round in 0..self.cfg.rounds {
            self.round(round)?;
            self.summary.rounds += 1;
        }
        Ok(())
    }

    /// Lays the template down again and damages it; returns the damaged log.
    fn damaged_copy(&mut self) -> Result<Vec<u8>> {
        let conv = self.root().join(CONV);
        let _ = std::fs::remove_dir_all(&conv);
        for (rel, bytes) in &self.template {
            let path = conv.join(rel);
            std::fs::create_dir_all(path.parent().context("parent")?)?;
            std::fs::write(path, bytes)?;
        }
        let mut log = self.template[Path::new("ledger.log")].clone();
        let (at, len) = self.records[self.rng.below(self.records.len() as u64) as usize];
        if self.rng.below(4) == 0 {
            log.truncate(at + 1 + self.rng.below(len as u64 - 1) as usize);
        } else {
            let i = at + 44 + self.rng.below(len as u64 - 44) as usize;
            log[i] ^= 1 << self.rng.below(8);
        }
        std::fs::write(conv.join("ledger.log"), &log)?;
        Ok(log)
    }

    fn round(&mut self, round: u64) -> Result<()> {
        let damaged = self.damaged_copy()?;
        let (code, plan, err) = self.run_to_end(&["--json", "repair", CONV])?;
        if code != 0 {
            self.fail(round, format!("dry run exited {code}: {}", err.trim()));
            return Ok(());
        }
        let plan: Value = serde_json::from_slice(&plan)?;
        let child = self.command(&["repair", CONV, "--accept-loss"]).spawn()?;
        match self.kill_at_random(child)? {
            Some(0) => self.check_repaired(round, &plan, false)?,
            Some(code) => self.fail(round, format!("repair exited {code}")),
            None => {
                let now = std::fs::read(self.root().join(CONV).join("ledger.log"))?;
                if now == damaged {
                    self.summary.left_original += 1;
                } else {
                    self.summary.left_repaired += 1;
                    self.check_repaired(round, &plan, true)?;
                }
                // A repair run to its end after the kill gives the repaired ledger.
                let (code, _, err) = self.run_to_end(&["repair", CONV, "--accept-loss"])?;
                if code != 0 {
                    self.fail(
                        round,
                        format!("repair after a kill exited {code}: {}", err.trim()),
                    );
                    return Ok(());
                }
                self.check_repaired(round, &plan, false)?;
            }
        }
        Ok(())
    }

    /// The conversation is the repaired ledger of `plan`: `verify` 0, every kept seq as in
    /// the baseline, every lost run one loss record.
    fn check_repaired(&mut self, round: u64, plan: &Value, after_kill: bool) -> Result<()> {
        let when = if after_kill { " (left by a kill)" } else { "" };
        let (code, _, err) = self.run_to_end(&["verify", CONV])?;
        // A kill after the rename may leave the old sidecars (a cache, stamped with the old
        // ledger id): `verify` says attention (8), the next writer rebuilds them.
        if code != 0 && !(after_kill && code == 8) {
            self.fail(round, format!("verify{when} exited {code}: {}", err.trim()));
            return Ok(());
        }
        let Some(lines) = self.log_lines()? else {
            self.fail(round, format!("log{when} failed: a mixed state"));
            return Ok(());
        };
        for run in plan["kept"].as_array().into_iter().flatten() {
            let (a, b) = (run[0].as_u64().unwrap_or(0), run[1].as_u64().unwrap_or(0));
            for seq in a..=b {
                match (self.baseline.get(&seq), lines.get(&seq)) {
                    (Some(want), Some(got)) if want == got => self.summary.kept_checked += 1,
                    (Some(_), _) => {
                        self.summary.intact_lost += 1;
                        self.fail(round, format!("kept seq {seq}{when} differs or is missing"));
                    }
                    (None, _) => {}
                }
            }
        }
        for lost in plan["lost"].as_array().into_iter().flatten() {
            let from = lost["from"].as_u64().unwrap_or(0);
            let marker = &lines.get(&from).map(|l| l["marker"].clone());
            let ok = marker.as_ref().is_some_and(|m| {
                m["type"] == "loss" && m["from"] == lost["from"] && m["to"] == lost["to"]
            });
            if !ok {
                self.fail(round, format!("no loss record{when} for {lost}"));
            }
        }
        Ok(())
    }

    /// Waits a random part of the typical run time, then SIGKILLs the child if it is still
    /// running. One round in four runs to completion. Returns the exit code of a child that
    /// finished.
    fn kill_at_random(&mut self, mut child: std::process::Child) -> Result<Option<i32>> {
        let started = Instant::now();
        let window = self.typical.as_micros() as u64 * 3 / 2;
        let delay = if self.rng.below(4) == 0 {
            Duration::from_secs(60)
        } else {
            Duration::from_micros(self.rng.below(window.max(1)))
        };
        loop {
            if let Some(status) = child.try_wait()? {
                self.typical = (self.typical * 7 + started.elapsed()) / 8;
                return Ok(Some(status.code().unwrap_or(-1)));
            }
            if started.elapsed() >= delay {
                child.kill()?;
                child.wait()?;
                self.summary.kills += 1;
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn fail(&mut self, round: u64, what: String) {
        self.summary.failures.push(format!("round {round}: {what}"));
    }
}

/// Every file under `dir` (relative path → bytes).
fn read_tree(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let path = e?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != "lock") {
                let rel = path.strip_prefix(dir)?.to_path_buf();
                out.insert(rel, std::fs::read(&path)?);
            }
        }
    }
    Ok(out)
}

/// `(offset, length)` of every record of a log image (64-byte header; a record's length is
/// 40 + body_len + meta_len, read from bytes 32..40 of its header).
fn record_spans(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 64;
    while pos + 40 <= log.len() {
        let u32_at = |i: usize| u32::from_le_bytes([log[i], log[i + 1], log[i + 2], log[i + 3]]);
        let len = 40 + u32_at(pos + 32) as usize + u32_at(pos + 36) as usize;
        out.push((pos, len));
        pos += len;
    }
    out
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rounds = arg(&args, "--rounds").map_or(Ok(400), |r| r.parse())?;
    let seed = arg(&args, "--seed").map_or_else(
        || {
            Ok(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64))
        },
        |s| s.parse(),
    )?;
    let ctxlog = match arg(&args, "--ctxlog") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()?
            .parent()
            .context("no parent")?
            .join("ctxlog"),
    };
    let s = run(&Config {
        ctxlog,
        rounds,
        seed,
    })?;
    println!(
        "| seed | rounds | kills | left original | left repaired | kept records checked | intact records lost | failures |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {seed} | {} | {} | {} | {} | {} | {} | {} |",
        s.rounds,
        s.kills,
        s.left_original,
        s.left_repaired,
        s.kept_checked,
        s.intact_lost,
        s.failures.len()
    );
    for f in &s.failures {
        eprintln!("{f}");
    }
    if !s.failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
