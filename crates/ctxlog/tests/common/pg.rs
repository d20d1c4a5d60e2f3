//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary directory, `pg_ctl
//! start` on a free loopback port, stopped (and deleted) on drop. PostgreSQL refuses to run
//! as root, so as root the server runs as the `postgres` OS user (`runuser`).
//!
//! Where the binaries are missing, [`PgCluster::start`] prints why and returns `None` (the
//! test skips); under `CI` it panics instead, so CI never passes without the suite.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running cluster.
pub struct PgCluster {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
    pub port: u16,
    as_postgres: bool,
}

/// The directory holding `initdb` and `pg_ctl`: `$PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else `$PATH`.
fn pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    if let Some(dir) = found.pop() {
        return Some(dir);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?;
    Path::new(path.trim()).parent().map(Path::to_path_buf)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Skips (None) or, under CI, fails: the PostgreSQL suite cannot run here.
pub fn unavailable(why: &str) -> Option<PgCluster> {
    assert!(
        std::env::var_os("CI").is_none(),
        "PostgreSQL tests cannot run under CI: {why}"
    );
    // Written to stderr directly, not through `eprintln!`, which the test harness captures
    // and shows only for a failure: a skipped suite must say so in the output of a run that
    // reports it "ok".
    let _ = writeln!(std::io::stderr(), "SKIPPED: a PostgreSQL test: {why}");
    None
}

impl PgCluster {
    /// Starts a fresh cluster, or returns `None` (after printing why) where PostgreSQL is
    /// not installed. Panics under `CI` instead of returning `None`.
    pub fn start() -> Option<PgCluster> {
        let Some(bin) = pg_bin() else {
            return unavailable("no initdb found (install the postgresql package, or set PG_BIN)");
        };
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("ctxlog-pg-")
            .tempdir()
            .unwrap();
        let root = dir.path().to_path_buf();
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", root.to_str().unwrap()])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                return unavailable(
                    "running as root and cannot hand a directory to the postgres user",
                );
            }
        }
        let cluster = PgCluster {
            _dir: dir,
            root,
            bin,
            port: free_port(),
            as_postgres,
        };
        let data = cluster.data_dir();
        let out = cluster.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        if !out.status.success() {
            return unavailable(&format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args).current_dir(&self.root).output().unwrap()
    }

    fn pg_ctl_start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.root.display()
        );
        let log = self.root.join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                self.data_dir().to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &opts,
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops the server at once (`-m immediate`: like a crash, recovered at next start).
    pub fn stop(&self) {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    /// Starts it again (same port and data).
    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The store URL of database `postgres` (schema from `schema`), with recall caches in a
    /// directory of `cache`.
    pub fn url(&self, schema: &str, cache: &Path) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?schema={schema}&cache_dir={}",
            self.port,
            cache.display()
        )
    }

    /// Every row of every table of `schema` (migrations aside), as one digest per table: to
    /// compare what is stored before and after an operation.
    pub fn fingerprint(&self, schema: &str) -> String {
        let tables = [
            "conversations",
            "events",
            "commits",
            "artifacts",
            "recovered",
        ];
        let parts: Vec<String> = tables
            .iter()
            .map(|t| {
                format!(
                    "coalesce((SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) \
                     FROM \"{schema}\".{t} r), '-')"
                )
            })
            .collect();
        self.psql(&format!("SELECT {}", parts.join(" || ' ' || ")))
    }

    /// Runs SQL as the superuser (`psql -c`), returning its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let port = self.port.to_string();
        let out = self.run(
            "psql",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-qAt",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
        );
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every file under `dir` whose bytes contain `needle`, relative to `dir`. Files that vanish
/// while scanning are skipped.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
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
                out.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}
