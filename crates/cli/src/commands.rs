//! One function per subcommand: read input, call the facade, print.

use std::io::Read;
use std::path::Path;

use ctxlog::Store;
use ctxlog::ledger::{Event, EventBody};

use crate::args::{
    Cli, Command, CommitArgs, ConvArg, CountArgs, EraseArgs, LogArgs, ProjectArgs, RecallArgs,
};
use crate::output::{self, Failure};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), Failure> {
    let json = cli.json;
    let root = cli.root;
    match cli.command {
        Command::Commit(args) => commit(&root, args),
        Command::Log(args) => log(&root, args, json),
        Command::Verify(args) => verify(&root, args, json),
        Command::Project(args) => project(&root, args),
        Command::Count(args) => count(args),
        Command::Recall(args) => recall(&root, args),
        Command::Reindex(args) => reindex(&root, args),
        Command::Erase(args) => erase(&root, args),
        Command::Demo => crate::demo::run(&root),
    }
}

fn commit(root: &Path, args: CommitArgs) -> Result<(), Failure> {
    let input = read_input(&args.file)?;
    // Parse before touching the store, so malformed input never creates anything.
    let commit = ctxlog::parse_commit(&input, args.id.as_deref())?;
    let receipt = Store::open(root).commit_to(&args.conversation, &commit)?;
    output::json_line(&receipt)
}

/// The most `commit` and `count` read from a file or stdin: four times the ledger's default
/// commit cap, so that the ledger, not the reader, names the limit a turn exceeds.
const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Reads a whole file, or standard input for `-`, up to [`MAX_INPUT_BYTES`].
fn read_input(file: &Path) -> Result<Vec<u8>, Failure> {
    let stdin = file == Path::new("-");
    let what = if stdin {
        "standard input".to_string()
    } else {
        file.display().to_string()
    };
    let cannot = |e: std::io::Error| Failure::other(format!("cannot read {what}: {e}"));
    let reader: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(file).map_err(&cannot)?)
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(&cannot)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(Failure::other(format!(
            "{what} is larger than {} MiB; nothing was written",
            MAX_INPUT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

fn log(root: &Path, args: LogArgs, json: bool) -> Result<(), Failure> {
    let store = Store::open(root);
    let snapshot = store.snapshot(&args.conversation)?;
    let last = match args.limit {
        Some(n) => args.from.saturating_add(n).saturating_sub(1),
        None => u64::MAX,
    };
    // Read in slices so a long ledger streams instead of loading at once.
    let mut next = args.from.max(1);
    while next <= last.min(snapshot.last_seq()) {
        let end = next.saturating_add(255).min(last);
        let mut out = Vec::new();
        for event in snapshot.events(next..=end)? {
            if json {
                serde_json::to_writer(&mut out, &event)
                    .map_err(|e| Failure::other(e.to_string()))?;
                out.push(b'\n');
            } else {
                out.extend_from_slice(log_line(&event).as_bytes());
            }
        }
        output::stdout(&out)?;
        next = end.saturating_add(1);
    }
    Ok(())
}

/// One human-readable line per event: seq, UTC time, kind, and a one-line text preview.
fn log_line(event: &Event) -> String {
    let detail = match &event.body {
        EventBody::ToolCall {
            call_id,
            tool,
            arguments,
        } => preview(&format!("{tool}({arguments}) [{call_id}]")),
        EventBody::ToolResult {
            call_id,
            tool,
            status,
            exit_code,
            text,
            artifact,
        } => {
            let exit = exit_code.map(|c| format!(" exit={c}")).unwrap_or_default();
            let art = artifact
                .as_ref()
                .map(|a| format!(" artifact={} ({} bytes)", a.name, a.bytes))
                .unwrap_or_default();
            preview(&format!(
                "{tool} [{call_id}] {}{exit}{art}: {text}",
                status.as_str()
            ))
        }
        EventBody::System { marker } => serde_json::to_string(marker).unwrap_or_default(),
        body => preview(body.text().unwrap_or_default()),
    };
    format!(
        "{:>6}  {}  {:<11}  {detail}\n",
        event.seq,
        utc(event.ts_ms),
        event.kind().as_str()
    )
}

fn preview(text: &str) -> String {
    const MAX: usize = 100;
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > MAX {
        format!("{}…", flat.chars().take(MAX).collect::<String>())
    } else {
        flat
    }
}

/// RFC 3339 UTC time, to the second, for milliseconds since the epoch.
fn utc(ts_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ts_ms.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(at).to_string()
}

fn verify(root: &Path, args: ConvArg, json: bool) -> Result<(), Failure> {
    let store = Store::open(root);
    let name = ctxlog::ConversationName::new(&args.conversation)?;
    let dir = store.conversation_dir(&name)?;
    let report = ctxlog::ledger::verify(&dir).map_err(ctxlog::Error::from)?;
    if json {
        output::json_line(&report)?;
    } else {
        output::stdout(verify_text(&report).as_bytes())?;
    }
    if report.artifact_problems.is_empty() {
        Ok(())
    } else {
        // Records are intact but content they reference is missing or altered: corruption.
        Err(Failure::with_code(
            5,
            "corrupt",
            format!(
                "{} referenced artifact(s) missing or altered: {}",
                report.artifact_problems.len(),
                report.artifact_problems.join("; ")
            ),
        ))
    }
}

/// The human-readable verify report: a summary line, then one line per finding.
fn verify_text(report: &ctxlog::ledger::VerifyReport) -> String {
    let mut text = format!(
        "{}: {} events (last seq {}), {} bytes, {} artifacts\n",
        if report.is_clean() {
            "ok"
        } else {
            "found problems"
        },
        report.events,
        report.last_seq,
        report.bytes,
        report.artifacts
    );
    if report.erased > 0 {
        text.push_str(&format!(
            "erased: {} seqs covered by tombstones (content removed)\n",
            report.erased
        ));
    }
    if report.torn_tail_bytes > 0 {
        text.push_str(&format!(
            "torn tail: {} bytes after the last complete commit ({}); the next writer cuts them and saves them under recovered/\n",
            report.torn_tail_bytes,
            report.torn_tail_reason.as_deref().unwrap_or("incomplete")
        ));
    }
    if !report.recovered.is_empty() {
        text.push_str(&format!(
            "recovered: {} torn tail(s) cut by earlier opens, kept for forensics: {}\n",
            report.recovered.len(),
            report.recovered.join(", ")
        ));
    }
    for problem in &report.artifact_problems {
        text.push_str(&format!("artifact: {problem}\n"));
    }
    if let Some(problem) = &report.sidecar_problem {
        text.push_str(&format!(
            "sidecar index: {problem} (a cache, rebuildable from the log)\n"
        ));
    }
    text
}

fn project(root: &Path, args: ProjectArgs) -> Result<(), Failure> {
    use ctxlog::projection::{ProjectionRequest, WireFormat};
    let mut request = ProjectionRequest::builder();
    let model = args.model.unwrap_or_else(|| match args.format {
        WireFormat::AnthropicMessages => "claude-sonnet-4-5".into(),
        _ => "gpt-4o".into(),
    });
    request
        .format(args.format)
        .model(model)
        .input(args.input)
        .tokenizer(args.tokenizer)
        .policy(args.policy)
        .notice(args.notice);
    if let Some(system) = args.system {
        request.system(system);
    }
    if let Some(n) = args.max_bytes {
        request.max_bytes(n);
    }
    if let Some(n) = args.max_tokens {
        request.max_tokens(n);
    }
    if let Some(n) = args.reserve_output {
        request.reserve_output(n);
    }
    if let Some(k) = args.recall {
        request.recall_k(k);
    }
    let tools = tool_definitions(args.tools.as_deref(), args.recall_tool, args.format)?;
    if !tools.is_empty() {
        request.tools(tools);
    }
    let store = Store::open(root);
    let projection = match store.snapshot(&args.conversation) {
        Ok(mut snapshot) => snapshot.project(&request)?,
        // The first model call of a new conversation has no history yet: project the
        // mandatory input alone, and create nothing.
        Err(ctxlog::Error::NotFound { .. }) => ctxlog::projection::project(
            &ctxlog::projection::SliceHistory::new(&[]),
            &request.build().map_err(ctxlog::Error::from)?,
            &mut ctxlog::projection::SizeCache::new(),
        )
        .map_err(ctxlog::Error::from)?,
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = &args.report {
        let mut report = serde_json::to_vec_pretty(&projection.report)
            .map_err(|e| Failure::other(e.to_string()))?;
        report.push(b'\n');
        std::fs::write(path, report)
            .map_err(|e| Failure::other(format!("cannot write {}: {e}", path.display())))?;
    }
    output::stdout(&projection.body)
}

/// The tool definitions of `--tools FILE`, plus ctxlog's recall tool with `--recall-tool`.
fn tool_definitions(
    file: Option<&Path>,
    recall_tool: bool,
    format: ctxlog::projection::WireFormat,
) -> Result<Vec<serde_json::Value>, Failure> {
    let mut tools = match file {
        None => Vec::new(),
        Some(path) => {
            let bytes = read_input(path)?;
            let tools = serde_json::from_slice::<Vec<serde_json::Value>>(&bytes).map_err(|e| {
                Failure::other(format!(
                    "--tools {}: expected a JSON array of tool definitions: {e}",
                    path.display()
                ))
            })?;
            if let Some(i) = tools.iter().position(|t| !t.is_object()) {
                return Err(Failure::other(format!(
                    "--tools {}: element {i} is not a tool definition object",
                    path.display()
                )));
            }
            tools
        }
    };
    if recall_tool {
        tools.push(match format {
            ctxlog::projection::WireFormat::AnthropicMessages => ctxlog::recall::anthropic_tool(),
            _ => ctxlog::recall::openai_tool(),
        });
    }
    Ok(tools)
}

fn count(args: CountArgs) -> Result<(), Failure> {
    let body = read_input(&args.file)?;
    let count = ctxlog::projection::count(&body, args.format, args.tokenizer)
        .map_err(ctxlog::Error::from)?;
    output::json_line(&count)
}

fn recall(root: &Path, args: RecallArgs) -> Result<(), Failure> {
    let store = Store::open(root);
    let mut snapshot = store.snapshot(&args.conversation)?;
    let options = ctxlog::recall::SearchOptions {
        seq: args.seq,
        offset: args.offset,
        limit: args.limit,
        ..Default::default()
    };
    let result = snapshot.recall(&args.query, &options)?;
    output::json_line(&result)
}

fn reindex(root: &Path, args: ConvArg) -> Result<(), Failure> {
    let store = Store::open(root);
    let mut snapshot = store.snapshot(&args.conversation)?;
    let bar = indicatif::ProgressBar::new(snapshot.last_seq());
    bar.set_style(
        indicatif::ProgressStyle::with_template("indexing {bar:40} {pos}/{len} events ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let stats = snapshot.reindex(&mut |p| {
        bar.set_length(p.head_seq);
        bar.set_position(p.seq);
    })?;
    bar.finish_and_clear();
    output::json_line(&serde_json::json!({
        "events_indexed": stats.events_indexed,
        "pages_written": stats.pages_written,
        "indexed_through": stats.indexed_through,
        "artifact_failures": stats.artifact_failures,
    }))
}

fn erase(root: &Path, args: EraseArgs) -> Result<(), Failure> {
    let store = Store::open(root);
    let what = match (args.turn, args.seqs) {
        _ if args.all => {
            store.erase_all(&args.conversation)?;
            return output::json_line(&serde_json::json!({
                "erased": "all",
                "conversation": args.conversation,
            }));
        }
        (Some(id), _) => ctxlog::Erase::Turn(id),
        (None, Some((a, b))) => ctxlog::Erase::Seqs(a, b),
        (None, None) => {
            return Err(Failure::with_code(
                2,
                "usage",
                "give one of --turn ID, --seqs A-B or --all",
            ));
        }
    };
    // Never creates a conversation: a missing one is NotFound.
    let mut conv = store.existing_conversation(&args.conversation)?;
    let report = conv.erase(what, &args.reason)?;
    output::json_line(&serde_json::json!({
        "erased": {"from": report.from, "to": report.to},
        "requested": {"from": report.requested.0, "to": report.requested.1},
        "events": report.events,
        "artifacts_deleted": report.artifacts_deleted,
        "recovered_deleted": report.recovered_deleted,
        "ledger_id": report.ledger_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_999), "2000-02-29T00:00:00Z");
    }
}
