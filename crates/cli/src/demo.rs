//! `ctxlog demo`: a guided run on the real store: commit a conversation, project it at
//! several budgets, see what a narrow request leaves out, recall it, and widen again.

use std::fmt::Write as _;
use std::path::Path;

use ctxlog::ops::{CommitRequest, ListRequest, ProjectRequest, RecallRequest, VerifyRequest};
use ctxlog::{EventBody, NewCommit, Projection, Store, ToolStatus};

use crate::output::{self, Failure};

const SYSTEM: &str = "You are a concise assistant.";
const QUESTION: &str = "What is my project code? 我的项目代号是什么？";
const FACT: &str = "ZX-81";

/// Runs the demo under `root`, in a new conversation named `demo` (or `demo-2`, …).
pub fn run(store: &Store, root: &Path) -> Result<(), Failure> {
    let name = free_name(store)?;
    let conv = Demo { store, name: &name };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ctxlog demo: store {}, conversation \"{name}\"\n",
        root.display()
    );

    commit_fixture(&conv, &mut out)?;
    let sizes = budget_table(&conv, &mut out)?;
    narrow_recall_widen(&conv, sizes, &mut out)?;

    let report = store.verify(&VerifyRequest {
        conversation: name.clone(),
    })?;
    let _ = writeln!(
        out,
        "\n5. `ctxlog verify {name}`: {} events, {} bytes, every checksum good, {} artifact(s).",
        report.ledger.events, report.ledger.bytes, report.ledger.artifacts
    );
    let root_arg = shell_quoted(&root.display().to_string());
    let _ = writeln!(
        out,
        "\nLook around:\n  ctxlog --root {root_arg} log {name}\n  ctxlog --root {root_arg} project {name} --input 'Which files?' --max-bytes 600 --report report.json\n  ctxlog --root {root_arg} recall {name} 'disk usage'"
    );
    let _ = writeln!(
        out,
        "\nSee it in the inspector (budget slider, timeline, recall):\n  ctxlog --root {root_arg} serve\n  then open http://127.0.0.1:7474/ and choose \"{name}\""
    );
    output::stdout(out.as_bytes())
}

/// The demo's conversation in its store.
struct Demo<'a> {
    store: &'a Store,
    name: &'a str,
}

impl Demo<'_> {
    fn project(&self, max_bytes: Option<u64>, recall: Option<usize>) -> ctxlog::Result<Projection> {
        self.store.project(&ProjectRequest {
            conversation: self.name.to_string(),
            model: Some("gpt-4o".into()),
            system: Some(SYSTEM.into()),
            input: Some(QUESTION.into()),
            max_bytes,
            recall,
            // The story is the turns policy's: whole turns, newest first.
            policy: ctxlog::Policy::Turns,
            ..Default::default()
        })
    }
}

fn free_name(store: &Store) -> Result<String, Failure> {
    let taken: Vec<String> = store
        .list(&ListRequest {})?
        .conversations
        .into_iter()
        .map(|c| c.name)
        .collect();
    let name = std::iter::once("demo".to_string())
        .chain((2..).map(|n| format!("demo-{n}")))
        .find(|n| !taken.contains(n))
        .unwrap_or_default();
    Ok(name)
}

fn commit_fixture(conv: &Demo<'_>, out: &mut String) -> Result<(), Failure> {
    let disk_report: String = (0..900)
        .map(|i| format!("/srv/data/shard-{i:03}  {} MB\n", 100 + i % 37))
        .collect();
    let report_kb = disk_report.len() / 1024;
    let turns = [
        vec![
            EventBody::User {
                text: "我的项目代号是 \"ZX-81\"。\nMy project code is \"ZX-81\" 🚀".into(),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: "Noted: your project code is \"ZX-81\" ✅".into(),
                provider_item: None,
            },
        ],
        vec![
            EventBody::User {
                text: "How full is the data disk?".into(),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::ToolCall {
                call_id: "call_1".into(),
                tool: "shell".into(),
                arguments: serde_json::json!({"cmd": "du -sh /srv/data/*"}),
                provider_item: None,
            },
            EventBody::ToolResult {
                call_id: "call_1".into(),
                tool: "shell".into(),
                status: ToolStatus::Ok,
                exit_code: Some(0),
                text: disk_report,
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: "900 shards, about 120 GB in all; the largest is 136 MB.".into(),
                provider_item: None,
            },
        ],
        vec![
            EventBody::User {
                text: "What's the weather like in 北京?".into(),
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: "Sunny, 25 °C — 天气晴朗 ☀️".into(),
                provider_item: None,
            },
        ],
    ];
    let _ = writeln!(
        out,
        "1. Commit three turns (each one atomic, fsynced, checksummed):"
    );
    for events in turns {
        let receipt = conv.store.commit(&CommitRequest {
            conversation: conv.name.to_string(),
            commit: NewCommit::new(events),
        })?;
        let _ = writeln!(out, "   seqs {}-{}", receipt.first_seq, receipt.last_seq);
    }
    let _ = writeln!(
        out,
        "   The {report_kb} KB tool output was stored as a content-addressed artifact; the event keeps a head/tail excerpt."
    );
    Ok(())
}

/// Body sizes with 0, 1, 2 and 3 turns kept.
struct Sizes {
    mandatory: u64,
    newest: u64,
}

fn budget_table(conv: &Demo<'_>, out: &mut String) -> Result<Sizes, Failure> {
    let full = conv.project(None, None)?;
    let mandatory = full.report.mandatory.bytes;
    let _ = writeln!(
        out,
        "\n2. Project \"{QUESTION}\" at several byte budgets (openai-chat):\n   {:>7}  {:>10}  {:>10}  {:>6}",
        "budget", "turns kept", "body bytes", "tokens"
    );
    let mut budgets = vec![mandatory];
    let mut budget = full.report.bytes;
    let mut kept = full.report.turns.kept;
    // Narrow from the full body. Stored tool output grows into free room
    // (docs/design.md#p12-room-is-used), so a body may fill its budget: until a turn is dropped,
    // step down by an eighth of the room.
    while budget > mandatory {
        budgets.push(budget);
        let projection = conv.project(Some(budget - 1), None)?;
        budget = if projection.report.turns.kept < kept {
            projection.report.bytes
        } else {
            (budget - 1 - (budget - 1 - mandatory) / 8).max(mandatory)
        };
        kept = projection.report.turns.kept;
    }
    budgets.sort_unstable();
    budgets.dedup();
    budgets.push(full.report.bytes + 100);
    let mut sizes = Sizes {
        mandatory,
        newest: mandatory,
    };
    for &budget in &budgets {
        let p = conv.project(Some(budget), None)?;
        if p.report.turns.kept == 1 {
            sizes.newest = p.report.bytes;
        }
        row(out, budget, &p);
    }
    match conv.project(Some(mandatory - 1), None) {
        Err(e) => {
            let _ = writeln!(out, "   {:>7}  refused (exit code 3): {e}", mandatory - 1);
        }
        Ok(p) => row(out, mandatory - 1, &p),
    }
    let _ = writeln!(
        out,
        "   Whole turns only, newest first; the report's byte figure is the body's exact length."
    );
    Ok(sizes)
}

fn row(out: &mut String, budget: u64, p: &Projection) {
    let _ = writeln!(
        out,
        "   {budget:>7}  {:>10}  {:>10}  {:>6}",
        p.report.turns.kept, p.report.bytes, p.report.tokens
    );
}

fn narrow_recall_widen(conv: &Demo<'_>, sizes: Sizes, out: &mut String) -> Result<(), Failure> {
    let narrow = conv.project(Some(sizes.newest), None)?;
    let body = String::from_utf8_lossy(&narrow.body);
    let _ = writeln!(
        out,
        "\n3. A narrow request ({} bytes) keeps only the newest turn: the project code is {}.",
        sizes.newest,
        if body.contains(FACT) {
            "present"
        } else {
            "absent"
        }
    );
    let result = conv.store.recall(&RecallRequest {
        conversation: conv.name.to_string(),
        query: "project code".into(),
        seq: None,
        offset: 0,
        limit: ctxlog::RECALL_DEFAULT_LIMIT,
    })?;
    if let Some(hit) = result.hits.first() {
        let _ = writeln!(
            out,
            "   `ctxlog recall` finds it: seq {} ({}): {:?}",
            hit.seq,
            hit.kind.as_str(),
            hit.text
        );
    }
    let with_pages = conv.project(Some(sizes.newest + 300), Some(2))?;
    let pages: Vec<u64> = with_pages
        .report
        .recall
        .included
        .iter()
        .map(|p| p.seq)
        .collect();
    let _ = writeln!(
        out,
        "   With --recall 2 and {} bytes, the body carries recalled page(s) from seq {pages:?}: the code is {}.",
        sizes.newest + 300,
        if String::from_utf8_lossy(&with_pages.body).contains(FACT) {
            "present"
        } else {
            "absent"
        }
    );
    let wide = conv.project(None, None)?;
    let _ = writeln!(
        out,
        "\n4. A wider request later keeps all {} turns: the code is {} again. Nothing was lost (mandatory part: {} bytes).",
        wide.report.turns.kept,
        if String::from_utf8_lossy(&wide.body).contains(FACT) {
            "present"
        } else {
            "absent"
        },
        sizes.mandatory
    );
    Ok(())
}

/// `text` as one shell word: as is when it holds only safe characters, else single-quoted.
fn shell_quoted(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}
