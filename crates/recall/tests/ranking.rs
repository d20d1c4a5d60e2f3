#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failure class: stale facts outranking their updates (docs/design.md#r4-ranking). A newer record
//! that supersedes an older one on the same subject — explicitly (a note's `supersedes`) or by
//! update language — ranks above it; equal scores go to the newer record; unrelated records with
//! update language do not jump ahead.

mod common;

use common::*;
use ctxlog_event::EventBody;
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};

fn index_of(events: &[ctxlog_event::Event]) -> (tempfile::TempDir, RecallIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = RecallIndex::open(dir.path().join("r.sqlite"), "L").unwrap();
    index.update(events, &NoArtifacts).unwrap();
    (dir, index)
}

fn top(index: &RecallIndex, q: &str) -> Vec<u64> {
    let r = index.search(q, &SearchOptions::default()).unwrap();
    r.hits.iter().map(|h| h.seq).collect()
}

#[test]
fn update_language_lifts_the_newer_fact() {
    let (_d, index) = index_of(&[
        note(
            1,
            "Build configuration: the release build uses the clang toolchain with LTO enabled and the build cache at /var/cache/build.",
        ),
        note(2, "Unrelated: lunch is at noon."),
        note(
            3,
            "Build configuration changed to the gcc toolchain instead; LTO stays enabled.",
        ),
    ]);
    assert_eq!(
        top(
            &index,
            "which toolchain does the release build configuration use"
        )[0],
        3
    );
}

#[test]
fn explicit_supersedes_lifts_the_newer_note() {
    let (_d, index) = index_of(&[
        note(
            1,
            "Deploy window: deploys to production happen on Tuesday and Thursday mornings between 9 and 11.",
        ),
        ev(
            2,
            EventBody::Note {
                text: "Deploy window is Friday.".into(),
                pinned: false,
                supersedes: Some(1),
                provider_item: None,
            },
        ),
    ]);
    assert_eq!(top(&index, "production deploy window mornings"), [2, 1]);
}

#[test]
fn without_update_language_the_better_match_wins() {
    let (_d, index) = index_of(&[
        note(
            1,
            "The cache directory is /var/cache/app and the cache size is 2 GB.",
        ),
        note(2, "Now playing: some music while we wait."),
    ]);
    assert_eq!(top(&index, "cache directory")[0], 1);
}

#[test]
fn ties_go_to_the_newer_record() {
    let (_d, index) = index_of(&[
        note(1, "retry budget is five"),
        note(2, "retry budget is five"),
    ]);
    assert_eq!(top(&index, "retry budget"), [2, 1]);
}

#[test]
fn a_named_speaker_prefers_what_that_speaker_said() {
    // Both turns match "support group" equally; the question names Caroline.
    let (_d, index) = index_of(&[
        user(1, "Caroline: I went to a support group yesterday."),
        assistant(2, "Melanie: I went to a support group yesterday."),
    ]);
    assert_eq!(top(&index, "Which support group did Caroline go to?")[0], 1);
    assert_eq!(top(&index, "Which support group did Melanie go to?")[0], 2);
}

#[test]
fn context_finds_the_answer_to_a_question_turn() {
    // The reply never repeats the question's words; its context field holds them.
    let (_d, index) = index_of(&[
        user(1, "What did you name the new puppy?"),
        assistant(2, "We went with Biscuit."),
        user(3, "Unrelated: the weather is fine."),
    ]);
    let seqs = top(&index, "puppy name");
    assert_eq!(seqs[0], 1);
    assert!(seqs.contains(&2), "{seqs:?}");
}

#[test]
fn dates_are_searchable_metadata() {
    let mut e = user(1, "We signed the lease.");
    e.ts_ms = 1_683_554_160_000; // Monday 8 May 2023
    let mut f = user(2, "We signed the contract.");
    f.ts_ms = 1_700_000_000_000; // November 2023
    let mut events = vec![e, f];
    for seq in 3..10 {
        let mut g = note(seq, "filler about other things");
        g.ts_ms = 1_710_000_000_000 + seq as i64; // March 2024
        events.push(g);
    }
    let (_d, index) = index_of(&events);
    assert_eq!(top(&index, "what did we sign in May 2023")[0], 1);
    assert_eq!(top(&index, "what did we sign in November")[0], 2);
}

#[test]
fn one_long_reply_is_one_hit_naming_its_other_matching_pages() {
    let paragraph = "The sprint plan keeps the sprint backlog small and the sprint review short. ";
    let reply = paragraph.repeat(120); // about 9,000 characters: five pages, all matching
    let (_d, index) = index_of(&[
        user(1, "How should I plan the sprint?"),
        assistant(2, &reply),
        user(3, "Unrelated: the office is closed on Friday."),
        assistant(4, "A sprint review is a short meeting."),
    ]);
    let r = index
        .search("sprint review", &SearchOptions::default())
        .unwrap();
    let seqs: Vec<u64> = r.hits.iter().map(|h| h.seq).collect();
    let mut distinct = seqs.clone();
    distinct.dedup();
    assert_eq!(seqs.len(), distinct.len(), "one hit per event: {seqs:?}");
    assert!(seqs.contains(&4) && seqs.contains(&1), "{seqs:?}");
    let long = r
        .hits
        .iter()
        .find(|h| h.seq == 2)
        .expect("the long reply is a hit");
    assert_eq!(long.pages, 5);
    let mut pages: Vec<u32> = long.other_pages.clone();
    pages.push(long.page);
    pages.sort_unstable();
    assert_eq!(pages, [0, 1, 2, 3, 4], "every matching page is named");
}

#[test]
fn a_first_person_question_prefers_what_the_user_said() {
    let (_d, index) = index_of(&[
        user(1, "My first sprint ends on March 29."),
        assistant(
            2,
            "Sprint planning: when the first sprint ends, review the sprint goals.",
        ),
    ]);
    assert_eq!(top(&index, "When does my first sprint end?")[0], 1);
    assert_eq!(top(&index, "When does the first sprint end?")[0], 2);
}

#[test]
fn a_relative_time_is_found_by_the_date_it_names() {
    // Tuesday 18 April 2023 and Thursday 20 April 2023, noon UTC.
    let (apr18, apr20) = (1_681_819_200_000, 1_681_992_000_000);
    let at = |e: ctxlog_event::Event, ts_ms: i64| ctxlog_event::Event { ts_ms, ..e };
    let (_d, index) = index_of(&[
        at(
            user(1, "We went to a convention together last month."),
            apr18,
        ),
        at(
            user(2, "We are going to a convention together soon."),
            apr20,
        ),
    ]);
    assert_eq!(top(&index, "Which convention in March 2023?")[0], 1);
    assert_eq!(
        top(&index, "Which convention?")[0],
        2,
        "else the newer first"
    );
}

#[test]
fn a_question_about_what_the_assistant_said_can_prefer_its_pages() {
    let events = [
        user(1, "My cache keeps expiring too early."),
        assistant(
            2,
            "For the cache, I recommend a longer expiry and a warm-up job.",
        ),
    ];
    let (_d, mut index) = index_of(&events);
    let q = "What cache expiry did you recommend for my app?";
    assert_eq!(top(&index, q)[0], 1, "by default a first-person question");
    index.set_ranking(ctxlog_recall::Ranking {
        second_person: Some(1.0),
        ..ctxlog_recall::Ranking::default()
    });
    assert_eq!(top(&index, q)[0], 2);
}
