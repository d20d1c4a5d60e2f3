//! Failure class: modules of the facade importing each other in a loop (the operations
//! needing the store that needs the operations), which hides the design and makes every
//! change reach everywhere.
//!
//! Guarantee: the modules of `src/` form the layers stated in `lib.rs`: a module names
//! (`crate::<module>`, or `crate::<Name>` re-exported at the crate root from a module) only
//! modules listed before it here. A module's own submodules (`store/builder.rs`,
//! `transfer/openai.rs`) count as that module; comments and unit tests are not imports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Every module, lowest layer first.
const LAYERS: &[&str] = &[
    "error",
    "json",
    "time",
    "redact",
    "backend",
    "retention",
    "config",
    "adapters",
    "transfer",
    "input",
    "ops",
    "call",
    "location",
    "handle",
    "store",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file belongs to: its first path component under `src/`.
fn module_of(path: &Path, src: &Path) -> String {
    let first = path.strip_prefix(src).unwrap().components().next().unwrap();
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// The code of a file: no comment lines, nothing from its `#[cfg(test)]` module on.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which module each name re-exported at the crate root (`pub use module::{A, B}`) is from.
fn reexports(lib: &str) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for item in lib.split(';') {
        let Some(rest) = item.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, list)) = rest.split_once("::") else {
            continue;
        };
        for name in list.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                names.insert(name.to_string(), module.to_string());
            }
        }
    }
    names
}

/// The names a file's code reaches through `crate::`: `crate::x`, `crate::{x, Y}`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let group = match rest.strip_prefix('{') {
            Some(inner) => &inner[..inner.find('}').unwrap_or(inner.len())],
            None => rest,
        };
        let words = group.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        let take = if rest.starts_with('{') { usize::MAX } else { 1 };
        out.extend(
            words
                .filter(|w| !w.is_empty())
                .take(take)
                .map(str::to_string),
        );
    }
    out
}

#[test]
fn modules_only_use_modules_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut upward = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("lib.rs")) {
        let module = module_of(file, &src);
        let own = rank(&module).unwrap_or_else(|| panic!("{module} is not in LAYERS"));
        for name in crate_paths(&code(&std::fs::read_to_string(file).unwrap())) {
            let used = if rank(&name).is_some() {
                name.clone()
            } else {
                match names.get(&name) {
                    Some(module) => module.clone(),
                    None => continue,
                }
            };
            if used != module && rank(&used).is_some_and(|r| r > own) {
                upward.push(format!("{} uses {used} ({name})", file.display()));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers: {upward:#?}");
}

#[test]
fn every_module_is_in_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in files.iter().filter(|f| !f.ends_with("lib.rs")) {
        let module = module_of(file, &src);
        assert!(
            LAYERS.contains(&module.as_str()),
            "{module} is not in LAYERS"
        );
    }
}
