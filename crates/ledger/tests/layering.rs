//! Failure class: modules of the crate importing each other in a loop.
//!
//! Guarantee: the modules of `src/` form the layers stated in the crate docs (`lib.rs`,
//! "Layout"): a module names (`crate::<module>`) only modules listed before it here, so no
//! two modules depend on each other. A module's own submodules (`state/read.rs`,
//! `storage/dir.rs`) count as that module.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// Every module, lowest layer first.
const LAYERS: &[&str] = &[
    "error",
    "hex",
    "event",
    "format",
    "digest",
    "validate",
    "options",
    "storage",
    "files",
    "scan",
    "tombstone",
    "artifact",
    "sidecar",
    "rules",
    "state",
    "recovery",
    "commit",
    "salvage",
    "carry",
    "erase",
    "verify",
    "repair",
    "reader",
    "ledger",
];

fn module_of(path: &Path, src: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a file names as `crate::<module>`.
fn uses(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

#[test]
fn modules_only_use_modules_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut upward = Vec::new();
    for file in files {
        let module = module_of(&file, &src);
        if module == "lib" {
            continue;
        }
        let own = rank(&module).unwrap_or_else(|| panic!("{module} is missing from LAYERS"));
        let text = std::fs::read_to_string(&file).unwrap();
        for used in uses(&text) {
            let theirs = rank(&used).unwrap_or_else(|| panic!("{used} is missing from LAYERS"));
            if theirs >= own && used != module {
                upward.push(format!("{} uses crate::{used}", file.display()));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layering:\n{}",
        upward.join("\n")
    );
}
