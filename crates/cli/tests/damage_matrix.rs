//! The damage matrix (docs/design.md#l11-repair): each kind of damage × what an operator
//! runs, every cell's outcome asserted. `CTXLOG_WRITE_MATRIX=1 cargo test -p ctxlog-cli
//! --test damage_matrix` rewrites the table in `docs/reliability.md` from the run.
//!
//! Fixture: five commits, t1 (seqs 1-2), t2 (3-6, a tool result stored as an artifact at
//! seq 5), t3 (7-9, a pinned note), t4 (10-11), t5 (12-13). Columns: `verify`'s exit code;
//! what `export --salvage` gives (events, damaged lines; it must write nothing); `log`'s and
//! `commit`'s exit codes; `erase --all`'s exit code (a damaged conversation can always be
//! erased whole).

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
    let mut table = Vec::new();
    let mut wrong = Vec::new();
    for (name, damage, want) in ROWS {
        let (got, erase) = row(*damage);
        if got != *want || erase != 0 {
            wrong.push(format!(
                "{name}: got {got:?} erase {erase}, want {want:?} erase 0"
            ));
        }
        table.push(format!(
            "| {name} | {} | {} events, {} damaged | {} | {} | {erase} |",
            got[0], got[1], got[2], got[3], got[4]
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
        "{start}\n| damage | verify | export --salvage | log | commit | erase --all |\n|---|---|---|---|---|---|\n{}\n{end}",
        rows.join("\n")
    );
    let (a, b) = (doc.find(start).unwrap(), doc.find(end).unwrap());
    std::fs::write(
        path,
        format!("{}{table}{}", &doc[..a], &doc[b + end.len()..]),
    )
    .unwrap();
}
