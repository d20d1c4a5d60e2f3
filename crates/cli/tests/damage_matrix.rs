//! The damage matrix (docs/design.md#l11-repair): each kind of damage × what an operator
//! runs, every cell's outcome asserted. `CTXLOG_WRITE_MATRIX=1 cargo test -p ctxlog-cli
//! --test damage_matrix` rewrites the table in `docs/reliability.md` from the run.
//!
//! Fixture: five commits, t1 (seqs 1-2), t2 (3-6, a tool result stored as an artifact at
//! seq 5), t3 (7-9, a pinned note), t4 (10-11), t5 (12-13). Columns: `verify`'s exit code;
//! what `export --salvage` gives (events, damaged lines; it must write nothing); `log`'s and
//! `commit`'s exit codes; `erase --all`'s exit code (a damaged conversation can always be
//! erased whole). Then, on a fresh copy of the damage, the repair columns (see
//! [`REPAIR_ROWS`]): the dry run's exit code and the seqs it would lose (it must write
//! nothing), `repair --accept-loss`'s exit code, and after it the exit codes of `verify`,
//! `log`, `project`, `recall`, a new `commit` (and the seq it got), a replay of a lost
//! commit's id, and whether export → import into a new conversation gives the same export.
//!
//! The PostgreSQL rows ([`PG_ROWS`]) run the same columns on the same fixture in a throwaway
//! cluster (one schema per row; "writes nothing" compares every row of the schema): a row
//! altered by hand (its checksum fails) and a row deleted by hand (a seq gap). Skipped with a
//! message where PostgreSQL is not installed; a failure under `CI`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[path = "../../ctxlog/tests/common/pg.rs"]
mod pg;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{Env, code, feed, five_commits, snapshot};

const CONV: &str = "chat";

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

fn at(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

/// Where a record starts: the `ctxR` magic before `needle`, minus the 4 CRC bytes.
fn record_start(bytes: &[u8], needle: &[u8]) -> usize {
    let i = at(bytes, needle);
    bytes[..i].windows(4).rposition(|w| w == b"ctxR").unwrap() - 4
}

type Damage = fn(&Path);

/// (damage, how it is done, expected: verify exit, salvage events, salvage damaged lines,
/// log exit, commit exit).
const ROWS: &[(&str, Damage, [u64; 5])] = &[
    (
        "bit flip in the first record",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = at(b, b"first question");
                b[i] ^= 0x01;
            })
        },
        [5, 12, 1, 5, 0],
    ),
    (
        "bit flip in a middle record",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = at(b, b"the code is ZX-81");
                b[i] ^= 0x01;
            })
        },
        [5, 12, 1, 5, 0],
    ),
    (
        "bit flip in the last record",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = at(b, b"fifth answer");
                b[i] ^= 0x01;
            })
        },
        [5, 12, 1, 5, 5],
    ),
    (
        "damaged length in a record header",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = record_start(b, b"fourth question");
                b[i + 35] = 0x7f;
            })
        },
        [5, 12, 1, 5, 0],
    ),
    (
        "bit flip in the log header",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                b[20] ^= 0x04;
            })
        },
        [5, 13, 1, 5, 5],
    ),
    (
        "log cut at a record boundary inside acknowledged commits",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = record_start(b, b"fourth answer");
                b.truncate(i);
            })
        },
        [5, 10, 1, 5, 5],
    ),
    (
        "log cut inside a record of acknowledged commits",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                let i = at(b, b"fourth answer");
                b.truncate(i);
            })
        },
        [5, 10, 1, 5, 5],
    ),
    (
        "ledger.log emptied (0 bytes) beside its sidecars",
        |d| std::fs::write(d.join("ledger.log"), b"").unwrap(),
        [5, 0, 2, 5, 5],
    ),
    (
        "junk appended",
        |d| {
            edit(&d.join("ledger.log"), |b| {
                b.extend_from_slice(b"junk junk junk");
            })
        },
        [8, 13, 1, 0, 0],
    ),
    (
        "ledger.idx deleted",
        |d| {
            std::fs::remove_file(d.join("ledger.idx")).unwrap();
        },
        [8, 13, 0, 0, 0],
    ),
    (
        "ledger.idx truncated",
        |d| {
            edit(&d.join("ledger.idx"), |b| {
                b.truncate(b.len() / 2);
            })
        },
        [0, 13, 0, 0, 0],
    ),
    (
        "ledger.idx flipped",
        |d| {
            edit(&d.join("ledger.idx"), |b| {
                b[100] ^= 0x01;
            })
        },
        [8, 13, 0, 0, 0],
    ),
    (
        "commits.idx deleted",
        |d| {
            std::fs::remove_file(d.join("commits.idx")).unwrap();
        },
        [8, 13, 0, 0, 0],
    ),
    (
        "artifact deleted",
        |d| {
            for e in std::fs::read_dir(d.join("artifacts")).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
            }
        },
        [5, 13, 1, 0, 0],
    ),
    (
        "artifact altered",
        |d| {
            for e in std::fs::read_dir(d.join("artifacts")).unwrap() {
                edit(&e.unwrap().path(), |b| b[0] ^= 0x20);
            }
        },
        [5, 13, 1, 0, 0],
    ),
];

/// The repair columns of each row of [`ROWS`], in the same order: dry run exit, seqs it would
/// lose, `--accept-loss` exit, then `verify`, `log`, `project`, `recall` and `commit` exit,
/// the new commit's first seq, the lost-id replay's exit (0 when no commit id was lost),
/// and export → import gives the same export (1) or not (0).
const REPAIR_ROWS: &[[u64; 11]] = &[
    [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 3, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 3, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 13, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 1],
];

/// The fixture's commit ids by their first seq.
const IDS: &[(u64, &str)] = &[(1, "t1"), (3, "t2"), (7, "t3"), (10, "t4"), (12, "t5")];

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Where a row of the matrix runs: a store directory, or a schema of a PostgreSQL cluster
/// (then the directory only holds the recall caches).
struct Target<'a> {
    env: Env,
    pg: Option<(&'a pg::PgCluster, String)>,
}

/// Everything a target stores, to compare before and after.
#[derive(Debug, PartialEq)]
enum Stored {
    Files(BTreeMap<PathBuf, Vec<u8>>),
    Rows(String),
}

impl<'a> Target<'a> {
    /// The fixture in a store directory.
    fn files() -> Target<'static> {
        Target {
            env: Env::with_five_commits(CONV),
            pg: None,
        }
    }

    /// The fixture in schema `schema` of `cluster`.
    fn pg(cluster: &'a pg::PgCluster, schema: &str) -> Target<'a> {
        let t = Target {
            env: Env::new(),
            pg: Some((cluster, schema.to_string())),
        };
        for (id, turn) in five_commits() {
            let out = t.run(&["commit", CONV, "--id", &id], turn.as_bytes());
            assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
        }
        t
    }

    fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut command = self.env.command(args);
        if let Some((cluster, schema)) = &self.pg {
            command.env(
                "CTXLOG_STORE",
                cluster.url(schema, &self.env.root().join("cache")),
            );
        }
        feed(command, stdin)
    }

    fn stored(&self) -> Stored {
        match &self.pg {
            None => Stored::Files(snapshot(self.env.root())),
            Some((cluster, schema)) => Stored::Rows(cluster.fingerprint(schema)),
        }
    }

    /// True while the conversation is stored.
    fn exists(&self) -> bool {
        match &self.pg {
            None => self.env.conv_dir(CONV).exists(),
            Some((cluster, schema)) => {
                let sql = format!(
                    "SELECT count(*) FROM \"{schema}\".conversations WHERE name = '{CONV}'"
                );
                cluster.psql(&sql).trim() != "0"
            }
        }
    }

    /// A file to write an export to.
    fn file(&self, name: &str) -> PathBuf {
        self.env.root().join(name)
    }
}

/// The repair columns of a damaged target (see [`REPAIR_ROWS`]).
fn repair_row(t: &Target) -> [u64; 11] {
    let before = t.stored();
    // The text words positions as the engine has them: rows have seqs, not byte offsets.
    let text = String::from_utf8_lossy(&t.run(&["repair", CONV], b"").stdout).into_owned();
    if t.pg.is_some() {
        assert!(
            !text.contains("byte offset") && !text.contains("recovered/"),
            "{text}"
        );
        assert!(text.contains("damage at seq 8"), "{text}");
    }
    let dry = t.run(&["--json", "repair", CONV], b"");
    assert_eq!(before, t.stored(), "a dry run writes nothing");
    let lost = json(&dry)["lost_seqs"].as_u64().unwrap_or(u64::MAX);
    let done = t.run(&["--json", "repair", CONV, "--accept-loss"], b"");
    let lost_id = json(&done)["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["outcome"]
                .as_str()
                .is_some_and(|o| o.contains("answers `lost`"))
        })
        .find_map(|c| {
            IDS.iter()
                .find(|(s, _)| c["first_seq"] == *s)
                .map(|(_, id)| *id)
        });
    let run = |args: &[&str]| code(&t.run(args, b"")) as u64;
    let verify = run(&["verify", CONV]);
    let log = run(&["log", CONV]);
    let project = run(&["project", CONV, "--input", "hi", "--max-bytes", "100000"]);
    let recall = run(&["recall", CONV, "question"]);
    let commit = t.run(
        &["commit", CONV],
        br#"{"user":"after","assistant":"repair"}"#,
    );
    let first_seq = json(&commit)["first_seq"].as_u64().unwrap_or(0);
    let replay = lost_id.map_or(0, |id| {
        let out = t.run(&["commit", CONV, "--id", id], br#"{"user":"retry"}"#);
        code(&out) as u64
    });
    let export = t.run(&["export", CONV], b"");
    let file = t.file("export.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let import = t.run(&["import", "copy", file.to_str().unwrap()], b"");
    let again = t.run(&["export", "copy"], b"");
    let same = code(&export) == 0 && code(&import) == 0 && export.stdout == again.stdout;
    [
        code(&dry) as u64,
        lost,
        code(&done) as u64,
        verify,
        log,
        project,
        recall,
        code(&commit) as u64,
        first_seq,
        replay,
        u64::from(same),
    ]
}

fn salvage(t: &Target) -> (u64, u64) {
    let before = t.stored();
    let out = t.run(&["export", CONV, "--salvage"], b"");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(before, t.stored(), "a salvage writes nothing");
    let (mut events, mut damaged) = (0, 0);
    for line in out.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        if v.get("damaged").is_some() {
            damaged += 1;
        } else {
            events += 1;
        }
    }
    (events, damaged)
}

/// The first columns of a damaged target, and `erase --all`'s exit code (it must be gone).
fn row(t: &Target) -> ([u64; 5], u64) {
    let verify = code(&t.run(&["verify", CONV], b"")) as u64;
    let (events, damaged) = salvage(t);
    let log = code(&t.run(&["log", CONV], b"")) as u64;
    let commit = code(&t.run(
        &["commit", CONV],
        br#"{"user":"after","assistant":"damage"}"#,
    ));
    let erase = code(&t.run(&["erase", CONV, "--all"], b"")) as u64;
    assert!(!t.exists() || erase != 0);
    ([verify, events, damaged, log, commit as u64], erase)
}

/// One line of the table in docs/reliability.md.
fn table_line(name: &str, got: [u64; 5], erase: u64, r: [u64; 11]) -> String {
    format!(
        "| {name} | {} | {} events, {} damaged | {} | {} | {erase} | {} ({} seqs lost) | {} | {} | {} | {} | {} | {} (seq {}) | {} | {} |",
        got[0],
        got[1],
        got[2],
        got[3],
        got[4],
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        if r[9] == 0 {
            "-".to_string()
        } else {
            r[9].to_string()
        },
        if r[10] == 1 { "same" } else { "differs" },
    )
}

/// The PostgreSQL rows: (damage, the SQL that does it to the fixture's schema `{s}`,
/// expected first columns as in [`ROWS`], expected repair columns as in [`REPAIR_ROWS`]).
const PG_ROWS: &[(&str, &str, [u64; 5], [u64; 11])] = &[
    (
        "PostgreSQL: a row altered (the pinned note, seq 8)",
        "UPDATE {s}.events SET payload = overlay(payload placing '\\x5a'::bytea from 12 for 1) \
         WHERE conversation = 'chat' AND seq = 8",
        [5, 12, 1, 5, 0],
        [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    ),
    (
        "PostgreSQL: a row deleted (the pinned note, seq 8)",
        "DELETE FROM {s}.events WHERE conversation = 'chat' AND seq = 8",
        [5, 12, 1, 5, 5],
        [0, 1, 0, 0, 0, 0, 0, 0, 14, 7, 1],
    ),
];

/// Runs the PostgreSQL rows (none where PostgreSQL is not installed): their table lines,
/// and what differs from what is expected.
fn pg_rows(wrong: &mut Vec<String>) -> Vec<String> {
    let Some(cluster) = pg::PgCluster::start() else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (i, (name, sql, want, want_repair)) in PG_ROWS.iter().enumerate() {
        let damaged = |case: &str| {
            let schema = format!("m{i}{case}");
            let t = Target::pg(&cluster, &schema);
            cluster.psql(&sql.replace("{s}", &format!("\"{schema}\"")));
            t
        };
        let (got, erase) = row(&damaged("a"));
        if got != *want || erase != 0 {
            wrong.push(format!(
                "{name}: got {got:?} erase {erase}, want {want:?} erase 0"
            ));
        }
        let r = repair_row(&damaged("b"));
        if r != *want_repair {
            wrong.push(format!("{name}: repair got {r:?}, want {want_repair:?}"));
        }
        lines.push(table_line(name, got, erase, r));
    }
    lines
}

#[test]
fn every_damage_kind_has_its_outcome() {
    assert_eq!(
        ROWS.len(),
        REPAIR_ROWS.len(),
        "one repair row per damage row"
    );
    let mut table = Vec::new();
    let mut wrong = Vec::new();
    for ((name, damage, want), want_repair) in ROWS.iter().zip(REPAIR_ROWS) {
        let damaged = || {
            let t = Target::files();
            damage(&t.env.conv_dir(CONV));
            t
        };
        let (got, erase) = row(&damaged());
        if got != *want || erase != 0 {
            wrong.push(format!(
                "{name}: got {got:?} erase {erase}, want {want:?} erase 0"
            ));
        }
        let r = repair_row(&damaged());
        if r != *want_repair {
            wrong.push(format!("{name}: repair got {r:?}, want {want_repair:?}"));
        }
        table.push(table_line(name, got, erase, r));
    }
    table.extend(pg_rows(&mut wrong));
    if std::env::var_os("CTXLOG_WRITE_MATRIX").is_some() {
        write_table(&table);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn write_table(rows: &[String]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (start, end) = ("<!-- damage-matrix:start -->", "<!-- damage-matrix:end -->");
    let table = format!(
        "{start}\n| damage | verify | export --salvage | log | commit | erase --all | repair (dry run) | repair --accept-loss | then verify | log | project | recall | commit | replay of a lost id | export → import |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n{}\n{end}",
        rows.join("\n")
    );
    let (a, b) = (doc.find(start).unwrap(), doc.find(end).unwrap());
    std::fs::write(
        path,
        format!("{}{table}{}", &doc[..a], &doc[b + end.len()..]),
    )
    .unwrap();
}
