//! References to the design stay traceable: every `docs/design.md#anchor` written anywhere in
//! the repository (code comments, docs, tests, scripts) names a heading that exists, every
//! Markdown link to it resolves from where it is written, and nothing cites a requirement or a
//! ticket that does not ship with the repository (an outside spec's ids, "issue N").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// GitHub's anchor for a heading: lowercase; letters, digits, `-` and `_` kept, each space a
/// `-`, everything else (`§`, `–`, `/`, punctuation) dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `docs/design.md`'s headings (code blocks aside).
fn design_anchors(root: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let mut in_code = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#')));
        }
    }
    anchors
}

/// Every file of the repository outside build output, installed packages, stores and fuzzing
/// corpora, with its text (files that are not UTF-8 text are left out, and so is this file,
/// whose examples are not references).
fn text_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    const SKIP: [&str; 10] = [
        ".git",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".schemathesis",
        ".ctxlog",
        ".venv",
        "corpus",
        "artifacts",
    ];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !(SKIP.contains(&name.as_str()) || name.starts_with("target")) {
                text_files(&path, out);
            }
        } else if path.ends_with(file!()) {
            continue;
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
}

/// `(prefix, anchor)` for each `…design.md#anchor` in `line`: the path written before
/// `design.md` (back to a space, bracket, quote or backquote) and the anchor after it.
fn references(line: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("design.md#") {
        let before = &rest[..at];
        let start = before
            .rfind(|c: char| c.is_whitespace() || "(`[<\"'".contains(c))
            .map_or(0, |i| i + 1);
        let after = &rest[at + "design.md#".len()..];
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(after.len());
        found.push((&before[start..], &after[..end]));
        rest = &after[end..];
    }
    found
}

/// Where `prefix` + `design.md` leads from `file`: a Markdown link from its own directory,
/// Markdown a program writes into a page of `docs/` from there, a code comment from the root.
fn resolve(root: &Path, file: &Path, line: &str, prefix: &str) -> Option<PathBuf> {
    let link = line.contains(&format!("]({prefix}design.md#"));
    let is_markdown = file.extension().is_some_and(|e| e == "md");
    let base = match (link, is_markdown) {
        (true, true) => file.parent()?.to_path_buf(),
        (true, false) => root.join("docs"),
        (false, _) => root.to_path_buf(),
    };
    base.join(format!("{prefix}design.md")).canonicalize().ok()
}

/// The broken references of one file, and how many it has.
fn check_file(
    root: &Path,
    anchors: &BTreeSet<String>,
    file: &Path,
    text: &str,
) -> (Vec<String>, usize) {
    let design = root.join("docs/design.md");
    let rel = file.strip_prefix(root).unwrap().display().to_string();
    let (mut bad, mut checked) = (Vec::new(), 0);
    for (n, line) in text.lines().enumerate() {
        let mut names: Vec<&str> = Vec::new();
        if file == design {
            // Links within the page: `[L10](#l10-event-times)`.
            names.extend(
                line.split("](#")
                    .skip(1)
                    .map(|s| s.split(')').next().unwrap_or("")),
            );
        }
        for (prefix, name) in references(line) {
            if resolve(root, file, line, prefix).as_deref() == Some(design.as_path()) {
                names.push(name);
            } else {
                bad.push(format!(
                    "{rel}:{}: {prefix}design.md does not lead to docs/design.md",
                    n + 1
                ));
            }
        }
        for name in names {
            checked += 1;
            if !anchors.contains(name) {
                bad.push(format!(
                    "{rel}:{}: docs/design.md has no heading #{name}",
                    n + 1
                ));
            }
        }
    }
    (bad, checked)
}

#[test]
fn every_design_reference_resolves() {
    let root = repo();
    let anchors = design_anchors(&root);
    let mut files = Vec::new();
    text_files(&root, &mut files);
    let (mut bad, mut checked) = (Vec::new(), 0);
    for (file, text) in &files {
        let (b, c) = check_file(&root, &anchors, file, text);
        bad.extend(b);
        checked += c;
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} references broken:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        checked > 300,
        "only {checked} references found: is the walk finding the tree?"
    );
}

/// Whether `line` cites an outside spec by id (the word, a space, then `L10`, `§9`, …) or a
/// ticket ("issue N" with a number).
fn cites_what_does_not_ship(line: &str) -> bool {
    // Built from parts, so that this file does not cite itself.
    let spec = ["SP", "EC "].concat();
    let cites_spec = line.match_indices(&spec).any(|(i, _)| {
        line[i + spec.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '§')
    });
    let cites_issue = ["issue ", "Issue "].iter().any(|word| {
        line.match_indices(word)
            .any(|(i, _)| line[i + word.len()..].starts_with(|c: char| c.is_ascii_digit()))
    });
    cites_spec || cites_issue
}

#[test]
fn nothing_cites_what_does_not_ship() {
    let root = repo();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    let mut bad = Vec::new();
    for (file, text) in &files {
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            if cites_what_does_not_ship(line) {
                bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "state the rule, or cite docs/design.md#…, instead:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(anchor("§9 Bad input and faults"), "9-bad-input-and-faults");
    assert_eq!(anchor("L8 Failed I/O"), "l8-failed-io");
    let line = "see docs/design.md#l10-event-times and [P5](design.md#p5-whole-turns).";
    assert_eq!(
        references(line),
        [("docs/", "l10-event-times"), ("", "p5-whole-turns")]
    );
    assert!(cites_what_does_not_ship(&["(SP", "EC L7)"].concat()));
    assert!(cites_what_does_not_ship(
        &["(iss", "ue 8, item 3)"].concat()
    ));
    assert!(!cites_what_does_not_ship("an issue with 2 writers"));
}
