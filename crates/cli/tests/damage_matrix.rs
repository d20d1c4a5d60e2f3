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

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Env, code, snapshot};

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

/// The repair columns of `damage` (see [`REPAIR_ROWS`]).
fn repair_row(damage: Damage) -> [u64; 11] {
    let env = Env::with_five_commits(CONV);
    damage(&env.conv_dir(CONV));
    let before = snapshot(env.root());
    let dry = env.run(&["--json", "repair", CONV], b"");
    assert_eq!(before, snapshot(env.root()), "a dry run writes nothing");
    let lost = json(&dry)["lost_seqs"].as_u64().unwrap_or(u64::MAX);
    let done = env.run(&["--json", "repair", CONV, "--accept-loss"], b"");
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
    let run = |args: &[&str]| code(&env.run(args, b"")) as u64;
    let verify = run(&["verify", CONV]);
    let log = run(&["log", CONV]);
    let project = run(&["project", CONV, "--input", "hi", "--max-bytes", "100000"]);
    let recall = run(&["recall", CONV, "question"]);
    let commit = env.run(
        &["commit", CONV],
        br#"{"user":"after","assistant":"repair"}"#,
    );
    let first_seq = json(&commit)["first_seq"].as_u64().unwrap_or(0);
    let replay = lost_id.map_or(0, |id| {
        let out = env.run(&["commit", CONV, "--id", id], br#"{"user":"retry"}"#);
        code(&out) as u64
    });
    let export = env.run(&["export", CONV], b"");
    let file = env.root().join("export.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let import = env.run(&["import", "copy", file.to_str().unwrap()], b"");
    let again = env.run(&["export", "copy"], b"");
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

fn salvage(env: &Env) -> (u64, u64) {
    let before = snapshot(env.root());
    let out = env.run(&["export", CONV, "--salvage"], b"");
    assert_eq!(code(&out), 0);
    assert_eq!(before, snapshot(env.root()), "a salvage writes nothing");
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

fn row(damage: Damage) -> ([u64; 5], u64) {
    let env = Env::with_five_commits(CONV);
    damage(&env.conv_dir(CONV));
    let verify = code(&env.run(&["verify", CONV], b"")) as u64;
    let (events, damaged) = salvage(&env);
    let log = code(&env.run(&["log", CONV], b"")) as u64;
    let commit = code(&env.run(
        &["commit", CONV],
        br#"{"user":"after","assistant":"damage"}"#,
    ));
    let erase = code(&env.run(&["erase", CONV, "--all"], b"")) as u64;
    assert!(!env.conv_dir(CONV).exists() || erase != 0);
    ([verify, events, damaged, log, commit as u64], erase)
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
        let (got, erase) = row(*damage);
        if got != *want || erase != 0 {
            wrong.push(format!(
                "{name}: got {got:?} erase {erase}, want {want:?} erase 0"
            ));
        }
        let r = repair_row(*damage);
        if r != *want_repair {
            wrong.push(format!("{name}: repair got {r:?}, want {want_repair:?}"));
        }
        table.push(format!(
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
            if r[9] == 0 { "-".to_string() } else { r[9].to_string() },
            if r[10] == 1 { "same" } else { "differs" },
        ));
    }
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
