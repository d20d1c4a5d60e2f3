//! `ctxlog demo`, the README's first command, runs on a fresh store and shows what it claims:
//! a refused projection, a narrow body without the old fact, recall finding it, and a wider
//! body with it again. Run twice, it uses a new conversation rather than failing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Env;

#[test]
fn the_demo_runs_and_tells_the_story() {
    let env = Env::new();
    let out = String::from_utf8(env.ok(&["demo"], b"")).unwrap();
    for claim in [
        "refused (exit code 3)",
        "keeps only the newest turn: the project code is absent",
        "`ctxlog recall` finds it",
        "the code is present again",
        "every checksum good",
    ] {
        assert!(out.contains(claim), "missing {claim:?} in:\n{out}");
    }
    let again = String::from_utf8(env.ok(&["demo"], b"")).unwrap();
    assert!(again.contains("conversation \"demo-2\""), "{again}");
}
