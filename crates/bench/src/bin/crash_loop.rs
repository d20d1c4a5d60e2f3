//! Crash loop (docs/design.md#10-evidence): kill -9 the `ctxlog` binary at random moments
//! while it commits, erases and builds the recall index, and check after every round that
//!
//! * every acknowledged commit (a receipt read from the child's stdout) is in `log --json`
//!   with exactly its events, and no commit is present in part;
//! * `verify` finds the ledger intact (exit 0, or 8: a kill may leave a torn tail or an
//!   interrupted erasure's leftovers, which the next writer open finishes);
//! * the text of every acknowledged erasure is in no file of the conversation's directory.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin crash_loop -- --rounds 1000 [--ctxlog PATH] [--seed N]
//! ```
//!
//! The `ctxlog` binary defaults to the one next to this program (cargo builds both into the
//! same `target/<profile>/`). Prints a table of figures; exits 1 if any check failed.
//! `crates/cli/tests/crash_loop.rs` runs a short loop in CI with the same code.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
#[path = "../rng.rs"]
mod rng;
use rng::XorShift as Rng;

/// What a loop is asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `ctxlog` binary.
    pub ctxlog: PathBuf,
    /// Rounds (one spawned and possibly killed operation each).
    pub rounds: u64,
    /// Seed of the kill schedule and the operations.
    pub seed: u64,
    /// Start a fresh conversation every this many rounds (keeps each check small).
    pub rounds_per_conversation: u64,
}

/// What a loop measured.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub rounds: u64,
    /// Children still running when SIGKILL arrived.
    pub kills: u64,
    pub commits_acked: u64,
    pub erasures_acked: u64,
    /// Acknowledged commits checked present (summed over every check).
    pub acked_checks: u64,
    pub failures: Vec<String>,
}

/// One commit this loop attempted: its token is in every event's text.
struct Attempt {
    token: String,
    events: usize,
    acked: Option<(u64, u64)>,
    /// An acknowledged erasure removed it.
    erased: bool,
    /// An erasure of it was killed: it may or may not have happened (whole, either way).
    erase_killed: bool,
}

struct Loop<'a> {
    cfg: &'a Config,
    root: PathBuf,
    rng: Rng,
    conv: String,
    attempts: Vec<Attempt>,
    erased_tokens: Vec<String>,
    /// Typical run time of an operation, to spread kills over its whole duration.
    typical: Duration,
    summary: Summary,
}

/// Runs the loop in a fresh temporary root.
pub fn run(cfg: &Config) -> Result<Summary> {
    let dir = tempfile_dir()?;
    let mut l = Loop {
        cfg,
        root: dir.clone(),
        rng: Rng(cfg.seed.max(1)),
        conv: String::new(),
        attempts: Vec::new(),
        erased_tokens: Vec::new(),
        typical: Duration::from_millis(10),
        summary: Summary::default(),
    };
    let result = l.all_rounds();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    Ok(l.summary)
}

fn tempfile_dir() -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("ctxlog-crash-loop-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

impl Loop<'_> {
    fn all_rounds(&mut self) -> Result<()> {
        for round in 0..self.cfg.rounds {
            if round % self.cfg.rounds_per_conversation.max(1) == 0 {
                self.conv = format!("c{}", round / self.cfg.rounds_per_conversation.max(1));
                self.attempts.clear();
                self.erased_tokens.clear();
            }
            self.round(round)?;
            self.summary.rounds += 1;
            self.check(round)?;
        }
        Ok(())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.cfg.ctxlog);
        c.arg("--root")
            .arg(&self.root)
            .args(args)
            .env_remove("CTXLOG_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn round(&mut self, round: u64) -> Result<()> {
        let acked: Vec<usize> = (0..self.attempts.len())
            .filter(|&i| self.attempts[i].acked.is_some() && !self.attempts[i].erased)
            .collect();
        match self.rng.below(10) {
            0 | 1 if !acked.is_empty() => {
                let i = acked[self.rng.below(acked.len() as u64) as usize];
                self.erase(i)
            }
            2 => self.recall(),
            _ => self.commit(round),
        }
    }

    fn commit(&mut self, round: u64) -> Result<()> {
        let token = format!("ztok{round:06}x{:04}q", self.rng.below(10_000));
        let big = self.rng.below(8) == 0;
        let (json, events) = if big {
            let output = format!("{token} ").repeat(2_000 + self.rng.below(4_000) as usize);
            let turn = serde_json::json!({"events": [
                {"kind": "user", "text": format!("run {token}")},
                {"kind": "tool_call", "call_id": "c1", "tool": "sh", "arguments": {"cmd": format!("gen {token}")}},
                {"kind": "tool_result", "call_id": "c1", "tool": "sh", "status": "ok", "text": output},
                {"kind": "assistant", "text": format!("done {token}")},
            ]});
            (turn.to_string(), 4)
        } else {
            let turn = serde_json::json!({"user": format!("question {token}"), "assistant": format!("answer {token}")});
            (turn.to_string(), 2)
        };
        let id = format!("id-{token}");
        let child = self
            .command(&["commit", &self.conv.clone(), "--id", &id])
            .spawn()?;
        let out = self.kill_at_random(child, json.as_bytes())?;
        let acked = match out {
            Some((0, stdout)) => Some(receipt(&stdout)?),
            _ => None,
        };
        if acked.is_some() {
            self.summary.commits_acked += 1;
        }
        self.attempts.push(Attempt {
            token,
            events,
            acked,
            erased: false,
            erase_killed: false,
        });
        Ok(())
    }

    fn erase(&mut self, i: usize) -> Result<()> {
        let Some((a, b)) = self.attempts[i].acked else {
            return Ok(());
        };
        let range = format!("{a}-{b}");
        let child = self
            .command(&["erase", &self.conv.clone(), "--seqs", &range])
            .spawn()?;
        match self.kill_at_random(child, b"")? {
            Some((0, _)) => {
                self.summary.erasures_acked += 1;
                self.attempts[i].erased = true;
                self.erased_tokens.push(self.attempts[i].token.clone());
            }
            Some(_) => {}
            None => self.attempts[i].erase_killed = true,
        }
        Ok(())
    }

    fn recall(&mut self) -> Result<()> {
        let child = self
            .command(&["recall", &self.conv.clone(), "question answer"])
            .spawn()?;
        self.kill_at_random(child, b"")?;
        Ok(())
    }

    /// Feeds `stdin`, waits a random part of the typical run time, then SIGKILLs the child
    /// if it is still running. Returns the exit code and stdout of a child that finished.
    fn kill_at_random(&mut self, mut child: Child, stdin: &[u8]) -> Result<Option<(i32, Vec<u8>)>> {
        let started = Instant::now();
        if let Some(mut s) = child.stdin.take() {
            use std::io::Write;
            let _ = s.write_all(stdin);
        }
        // One round in four runs to completion: it measures the typical run time and is
        // acknowledged; the others are killed at a uniform moment within 1.5 typical runs.
        let window = self.typical.as_micros() as u64 * 3 / 2;
        let delay = if self.rng.below(4) == 0 {
            Duration::from_secs(60)
        } else {
            Duration::from_micros(self.rng.below(window.max(1)))
        };
        let deadline = started + delay;
        loop {
            if let Some(status) = child.try_wait()? {
                let took = started.elapsed();
                self.typical = (self.typical * 7 + took) / 8;
                let mut stdout = Vec::new();
                if let Some(mut s) = child.stdout.take() {
                    s.read_to_end(&mut stdout)?;
                }
                return Ok(Some((status.code().unwrap_or(-1), stdout)));
            }
            if Instant::now() >= deadline {
                child.kill()?; // SIGKILL on Unix
                child.wait()?;
                self.summary.kills += 1;
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn run_to_end(&self, args: &[&str]) -> Result<(i32, Vec<u8>, String)> {
        let out = self.command(args).stdin(Stdio::null()).output()?;
        Ok((
            out.status.code().unwrap_or(-1),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    fn fail(&mut self, round: u64, what: String) {
        self.summary
            .failures
            .push(format!("round {round} ({}): {what}", self.conv));
    }

    fn check(&mut self, round: u64) -> Result<()> {
        let conv = self.conv.clone();
        if !self.attempts.iter().any(|a| a.acked.is_some()) {
            // Nothing acknowledged yet: a killed first commit may leave no conversation.
            return Ok(());
        }
        let (code, _, err) = self.run_to_end(&["verify", &conv])?;
        // 8: intact, with what a kill leaves for the next writer open (docs/reliability.md).
        if code != 0 && code != 8 {
            self.fail(round, format!("verify exited {code}: {}", err.trim()));
        }
        let (code, stdout, err) = self.run_to_end(&["log", &conv, "--json"])?;
        if code != 0 {
            self.fail(round, format!("log exited {code}: {}", err.trim()));
            return Ok(());
        }
        let log = String::from_utf8_lossy(&stdout).into_owned();
        let events: Vec<serde_json::Value> = log
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .context("log --json printed a line that is not JSON")?;
        let mut problems = Vec::new();
        for a in &self.attempts {
            let have: Vec<&serde_json::Value> = events
                .iter()
                .filter(|e| e.to_string().contains(&a.token))
                .collect();
            if a.erased {
                if !have.is_empty() {
                    problems.push(format!("erased {} still in log", a.token));
                }
                continue;
            }
            if !have.is_empty() && have.len() != a.events {
                problems.push(format!(
                    "partial commit {}: {} of {} events",
                    a.token,
                    have.len(),
                    a.events
                ));
            }
            if let Some((first, last)) = a.acked {
                self.summary.acked_checks += 1;
                if a.erase_killed && have.is_empty() {
                    continue; // the killed erasure had completed
                }
                let seqs: BTreeSet<u64> = have.iter().filter_map(|e| e["seq"].as_u64()).collect();
                let want: BTreeSet<u64> = (first..=last).collect();
                if seqs != want {
                    problems.push(format!(
                        "acknowledged {} at {first}-{last}, log has {seqs:?}",
                        a.token
                    ));
                }
            }
        }
        for token in &self.erased_tokens {
            for file in files_containing(&self.root.join(&conv), token.as_bytes()) {
                problems.push(format!("erased {token} found in {}", file.display()));
            }
        }
        for p in problems {
            self.fail(round, p);
        }
        Ok(())
    }
}

fn receipt(stdout: &[u8]) -> Result<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(stdout).context("commit receipt")?;
    match (v["first_seq"].as_u64(), v["last_seq"].as_u64()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => bail!("commit receipt without seqs: {v}"),
    }
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                found.push(path);
            }
        }
    }
    found
}

fn parse_args() -> Result<Config> {
    let mut cfg = Config {
        ctxlog: std::env::current_exe()?.with_file_name("ctxlog"),
        rounds: 1000,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        rounds_per_conversation: 100,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => cfg.rounds = value()?.parse()?,
            "--seed" => cfg.seed = value()?.parse()?,
            "--ctxlog" => cfg.ctxlog = PathBuf::from(value()?),
            "--per-conversation" => cfg.rounds_per_conversation = value()?.parse()?,
            other => bail!(
                "unknown argument {other} (--rounds N, --seed N, --ctxlog PATH, --per-conversation N)"
            ),
        }
    }
    if !cfg.ctxlog.exists() {
        bail!(
            "no ctxlog binary at {} (build it: cargo build --release -p ctxlog-cli, or pass --ctxlog PATH)",
            cfg.ctxlog.display()
        );
    }
    Ok(cfg)
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let cfg = parse_args()?;
    let started = Instant::now();
    let s = run(&cfg)?;
    println!(
        "crash loop: ctxlog = {}, seed = {}",
        cfg.ctxlog.display(),
        cfg.seed
    );
    println!(
        "| rounds | kills (SIGKILL while running) | commits acked | erasures acked | acked-commit checks | failures | time |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {:.1} s |",
        s.rounds,
        s.kills,
        s.commits_acked,
        s.erasures_acked,
        s.acked_checks,
        s.failures.len(),
        started.elapsed().as_secs_f64()
    );
    for f in s.failures.iter().take(50) {
        println!("FAIL {f}");
    }
    if !s.failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
