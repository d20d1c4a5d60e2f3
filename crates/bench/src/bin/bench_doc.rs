//! Rewrites the results blocks of a benchmarks page from a directory of outputs (run by
//! `scripts/bench-all`): every `RESULTS_DIR/NAME.md` replaces the lines between
//! `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` of `DOC` (see `ctxlog_bench::doc`). The
//! page is written (through a temporary file and a rename) only when every marker checks out;
//! an output with no block is named on stderr and left out.
//!
//! ```text
//! bench_doc DOC RESULTS_DIR
//! ```

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [doc_path, dir] = args.as_slice() else {
        bail!("usage: bench_doc DOC RESULTS_DIR");
    };
    let doc = std::fs::read_to_string(doc_path).with_context(|| format!("reading {doc_path}"))?;
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {dir}"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md")
            && let Some(name) = path.file_stem().and_then(|s| s.to_str())
        {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            results.insert(name.to_owned(), text);
        }
    }
    let (new, unplaced) =
        ctxlog_bench::doc::rewrite(&doc, &results).with_context(|| format!("in {doc_path}"))?;
    let tmp = format!("{doc_path}.tmp");
    std::fs::write(&tmp, new).with_context(|| format!("writing {tmp}"))?;
    std::fs::rename(&tmp, doc_path).with_context(|| format!("renaming {tmp}"))?;
    let names: Vec<&String> = results.keys().filter(|k| !unplaced.contains(k)).collect();
    eprintln!("{doc_path}: rewrote {names:?}");
    if !unplaced.is_empty() {
        eprintln!("{doc_path}: no <!-- bench:NAME --> block for {unplaced:?}; left out");
    }
    Ok(())
}
