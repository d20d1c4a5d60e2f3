//! Failure class: the documented format drifting from the code.
//!
//! `docs/ledger-format.md` is the contract for anyone reading a ledger without this crate.
//! This test parses every table marked `<!-- layout: NAME -->` in it and requires the field
//! names, offsets and widths to equal `format::LAYOUTS`, the constants the codec uses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use ctxlog_ledger::format::LAYOUTS;

fn documented_layouts() -> BTreeMap<String, Vec<(String, usize, usize)>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ledger-format.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("<!-- layout: ") {
            current = Some(rest.trim_end_matches("-->").trim().to_string());
            out.insert(current.clone().unwrap(), Vec::new());
            continue;
        }
        let Some(name) = &current else { continue };
        if !line.starts_with('|') {
            if !line.trim().is_empty() {
                current = None;
            }
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Ok(offset), Ok(width)) = (cells[1].parse::<usize>(), cells[2].parse::<usize>()) else {
            continue; // header or separator row
        };
        let field = cells[3].trim_matches('`').to_string();
        out.get_mut(name).unwrap().push((field, offset, width));
    }
    out
}

#[test]
fn every_documented_table_matches_the_code() {
    let doc = documented_layouts();
    let code: BTreeMap<String, Vec<(String, usize, usize)>> = LAYOUTS
        .iter()
        .map(|(name, fields)| {
            (
                name.to_string(),
                fields
                    .iter()
                    .map(|(f, o, w)| (f.to_string(), *o, *w))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(doc, code);
}
