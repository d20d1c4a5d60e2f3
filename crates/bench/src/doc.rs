//! Rewriting the results in `docs/benchmarks.md` (run by `scripts/bench-all` through the
//! `bench_doc` bin): each program's output block sits between `<!-- bench:NAME -->` and
//! `<!-- /bench:NAME -->` lines, and a new run replaces what is between them; every line
//! outside the markers (the prose) stays as it is.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

fn open_marker(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<!-- bench:")?
        .strip_suffix("-->")
        .map(str::trim)
}

fn close_marker(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<!-- /bench:")?
        .strip_suffix("-->")
        .map(str::trim)
}

/// `doc` with the block of every NAME in `results` replaced by its text (markers kept), and
/// the names of the results that have no block (a program the page does not show yet).
/// Blocks without a result are left as they were.
///
/// # Errors
/// A marker that is not closed (or closed without being opened, or nested, or a name marked
/// twice): nothing is rewritten then.
pub fn rewrite(doc: &str, results: &BTreeMap<String, String>) -> Result<(String, Vec<String>)> {
    let mut out = String::with_capacity(doc.len());
    let mut open: Option<(&str, usize)> = None;
    let mut seen: Vec<String> = Vec::new();
    for (i, line) in doc.split_inclusive('\n').enumerate() {
        if let Some(name) = open_marker(line) {
            if let Some((outer, at)) = open {
                bail!(
                    "line {}: bench:{name} opened inside bench:{outer} (line {at})",
                    i + 1
                );
            }
            if seen.iter().any(|s| s == name) {
                bail!("line {}: bench:{name} is marked twice", i + 1);
            }
            seen.push(name.to_owned());
            open = Some((name, i + 1));
            out.push_str(line);
            if let Some(text) = results.get(name) {
                out.push_str(text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            continue;
        }
        if let Some(name) = close_marker(line) {
            match open {
                Some((o, _)) if o == name => open = None,
                _ => bail!("line {}: /bench:{name} closes nothing open", i + 1),
            }
            out.push_str(line);
            continue;
        }
        match open {
            Some((name, _)) if results.contains_key(name) => {}
            _ => out.push_str(line),
        }
    }
    if let Some((name, at)) = open {
        bail!("bench:{name} (line {at}) is never closed");
    }
    let unplaced = results
        .keys()
        .filter(|k| !seen.contains(k))
        .cloned()
        .collect();
    Ok((out, unplaced))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn results(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const DOC: &str = "# Title\n\nprose before\n<!-- bench:a -->\n```\nold a\n```\n<!-- /bench:a -->\nprose between\n<!-- bench:b -->\nold b\n<!-- /bench:b -->\nprose after\n";

    #[test]
    fn replaces_the_marked_blocks_and_keeps_the_prose() {
        let (out, unplaced) = rewrite(DOC, &results(&[("a", "```\nnew a\n```\n")])).unwrap();
        assert_eq!(
            out,
            "# Title\n\nprose before\n<!-- bench:a -->\n```\nnew a\n```\n<!-- /bench:a -->\nprose between\n<!-- bench:b -->\nold b\n<!-- /bench:b -->\nprose after\n"
        );
        assert!(unplaced.is_empty());
        // Rewriting again with the same result changes nothing more.
        let (again, _) = rewrite(&out, &results(&[("a", "```\nnew a\n```")])).unwrap();
        assert_eq!(again, out);
        let (same, none) = rewrite(DOC, &BTreeMap::new()).unwrap();
        assert_eq!((same.as_str(), none.len()), (DOC, 0));
    }

    #[test]
    fn bad_markers_are_refused() {
        let unclosed = "<!-- bench:a -->\nx\n";
        assert!(rewrite(unclosed, &BTreeMap::new()).is_err());
        let stray = "x\n<!-- /bench:a -->\n";
        assert!(rewrite(stray, &BTreeMap::new()).is_err());
        let nested = "<!-- bench:a -->\n<!-- bench:b -->\n<!-- /bench:b -->\n<!-- /bench:a -->\n";
        assert!(rewrite(nested, &BTreeMap::new()).is_err());
        let twice = "<!-- bench:a -->\n<!-- /bench:a -->\n<!-- bench:a -->\n<!-- /bench:a -->\n";
        assert!(rewrite(twice, &BTreeMap::new()).is_err());
    }

    #[test]
    fn a_result_without_a_block_is_named_and_changes_nothing() {
        let (out, unplaced) = rewrite(DOC, &results(&[("c", "x")])).unwrap();
        assert_eq!((out.as_str(), unplaced), (DOC, vec!["c".to_owned()]));
    }
}
