//! One function per subcommand: read input, call the facade, print.

use std::path::Path;

use ctxlog::ops::{
    CommitRequest, CountRequest, EraseRequest, EraseTarget, ExportRequest, GcRequest,
    ImportRequest, ListRequest, LogRequest, ProjectRequest, RecallIndexCheck, RecallRequest,
    ReindexRequest, RepairRequest, RepairResponse, VerifyRequest, VerifyResponse,
};
use ctxlog::{Event, EventBody, Store};

use crate::args::{
    Cli, Command, CommitArgs, ConvArg, CountArgs, EraseArgs, ExportArgs, GatewayArgs, GcArgs,
    ImportArgs, LogArgs, ProjectArgs, RecallArgs, RepairArgs, ServeArgs,
};
use crate::output::{self, Failure};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), Failure> {
    let json = cli.json;
    let mut options = ctxlog::Options::default();
    options.lock_wait(cli.wait);
    let location = match &cli.store {
        Some(url) => ctxlog::StoreLocation::parse(url)?,
        None => ctxlog::StoreLocation::dir(&cli.root),
    };
    let mut builder = ctxlog::StoreBuilder::new(location.clone());
    builder
        .options(options)
        .redaction(cli.redaction.overrides());
    if let Some(file) = &cli.config {
        builder.config_file(file);
    }
    // Every command but `serve` runs on one store; `serve` opens one per tenant.
    let store = || builder.build();
    match cli.command {
        Command::Commit(args) => commit(&store()?, args),
        Command::Log(args) => log(&store()?, args, json),
        Command::Verify(args) => verify(&store()?, args, json),
        Command::Project(args) => project(&store()?, args),
        Command::Count(args) => count(&store()?, args),
        Command::Recall(args) => recall(&store()?, args),
        Command::Reindex(args) => reindex(&store()?, args),
        Command::Repair(args) => repair(&store()?, args, json),
        Command::Erase(args) => erase(&store()?, args),
        Command::List => list(&store()?, json),
        Command::Export(args) => export(&store()?, args),
        Command::Import(args) => import(&store()?, args),
        Command::Demo => crate::demo::run(&store()?, &cli.root),
        Command::Gc(args) => gc(&store()?, args),
        Command::Mcp => {
            ctxlog_mcp::run_stdio(store()?).map_err(|e| Failure::other(format!("mcp: {e}")))
        }
        Command::Serve(args) => serve(location, builder.resolved_config()?, args),
        Command::Gateway(args) => gateway(location, builder.resolved_config()?, args),
    }
}

fn commit(store: &Store, args: CommitArgs) -> Result<(), Failure> {
    let input = read_input(&args.file, ctxlog::ops::MAX_INPUT_BYTES)?;
    // Parse before touching the store, so malformed input never creates anything.
    let request = CommitRequest::from_json(&args.conversation, &input, args.id.as_deref())?;
    output::json_line(&store.commit(&request)?)
}

/// Reads a whole file, or standard input for `-`, up to `cap` bytes
/// ([`ctxlog::ops::MAX_INPUT_BYTES`], [`ctxlog::ops::MAX_IMPORT_BYTES`]).
fn read_input(file: &Path, cap: u64) -> Result<Vec<u8>, Failure> {
    if file == Path::new("-") {
        return Ok(ctxlog::ops::read_input(
            std::io::stdin().lock(),
            cap,
            "standard input",
        )?);
    }
    let what = file.display().to_string();
    let opened = std::fs::File::open(file)
        .map_err(|e| Failure::other(format!("cannot read {what}: {e}")))?;
    Ok(ctxlog::ops::read_input(opened, cap, &what)?)
}

fn log(store: &Store, args: LogArgs, json: bool) -> Result<(), Failure> {
    let last = match args.limit {
        Some(n) => args.from.saturating_add(n).saturating_sub(1),
        None => u64::MAX,
    };
    // Read in slices so a long ledger streams instead of loading at once. Seq 0 is refused
    // by the first read (seqs start at 1).
    let mut next = args.from;
    while next <= last {
        let span = LOG_SLICE.min((last - next).saturating_add(1));
        let slice = store.log(&LogRequest {
            conversation: args.conversation.clone(),
            from: next,
            limit: Some(span),
        })?;
        let mut out = Vec::new();
        for event in &slice.events {
            if json {
                serde_json::to_writer(&mut out, event)
                    .map_err(|e| Failure::other(e.to_string()))?;
                out.push(b'\n');
            } else {
                out.extend_from_slice(log_line(event).as_bytes());
            }
        }
        output::stdout(&out)?;
        next = next.saturating_add(span);
        if next > slice.last_seq {
            break;
        }
    }
    Ok(())
}

/// Events read per slice by `log`.
const LOG_SLICE: u64 = 256;

/// One human-readable line per event: seq, UTC time, kind, and a one-line text preview.
fn log_line(event: &Event) -> String {
    let detail = match &event.body {
        EventBody::ToolCall {
            call_id,
            tool,
            arguments,
            ..
        } => preview(&format!("{tool}({arguments}) [{call_id}]")),
        EventBody::ToolResult {
            call_id,
            tool,
            status,
            exit_code,
            text,
            artifact,
            ..
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
        body @ EventBody::Opaque { format, item } => preview(&format!(
            "{} {}: {}",
            format.as_str(),
            item.get("type").and_then(|t| t.as_str()).unwrap_or("?"),
            body.readable_text()
        )),
        // With parts: the text, then each part's text or marker (`[image]`, `[document NAME]`).
        body => preview(&body.readable_text()),
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
        .map(|c| if is_unsafe_for_terminal(c) { ' ' } else { c })
        .collect();
    if flat.chars().count() > MAX {
        format!("{}…", flat.chars().take(MAX).collect::<String>())
    } else {
        flat
    }
}

/// Characters that must not reach a terminal raw: controls (escape sequences) and the
/// bidirectional formatting characters that reorder what follows them on screen.
fn is_unsafe_for_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// RFC 3339 UTC time, to the second, for milliseconds since the epoch.
fn utc(ts_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ts_ms.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(at).to_string()
}

fn verify(store: &Store, args: ConvArg, json: bool) -> Result<(), Failure> {
    let report = store.verify(&VerifyRequest {
        conversation: args.conversation,
    })?;
    if json {
        output::json_line(&report)?;
    } else {
        output::stdout(verify_text(&report).as_bytes())?;
    }
    if let Some(problem) = ctxlog::ops::verify_problem(&report) {
        return Err(problem.into());
    }
    let attention = report.attention();
    if attention.is_empty() {
        return Ok(());
    }
    Err(Failure::attention(format!(
        "the ledger is intact, but {} need(s) attention: {}",
        attention.len(),
        attention.join("; ")
    )))
}

fn repair(store: &Store, args: RepairArgs, json: bool) -> Result<(), Failure> {
    let report = store.repair(&RepairRequest {
        conversation: args.conversation.clone(),
        accept_loss: args.accept_loss,
    })?;
    if json {
        output::json_line(&report)
    } else {
        output::stdout(repair_text(&args.conversation, &report).as_bytes())
    }
}

/// The human-readable repair plan (or what was done): a summary line, then one line per
/// kept run, lost run, affected commit and saved range, then the next step.
fn repair_text(conv: &str, r: &RepairResponse) -> String {
    let spans = |runs: &[(u64, u64)]| {
        let parts: Vec<String> = runs.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    };
    let mut text = match (r.needed, r.applied) {
        (false, _) => format!(
            "nothing to repair in the log: {} seqs intact; the sidecar indexes {}\n",
            r.kept_seqs,
            if r.sidecars_rebuilt && r.applied {
                "were rebuilt"
            } else {
                "are rebuilt by --accept-loss"
            }
        ),
        (true, false) => format!("repair plan (dry run, nothing changed) for {conv}:\n"),
        (true, true) => format!("repaired {conv}:\n"),
    };
    if let Some(problem) = &r.header_problem {
        text.push_str(&format!("log header: {problem} (rewritten)\n"));
    }
    if r.needed {
        text.push_str(&format!(
            "kept: {} seqs ({})\n",
            r.kept_seqs,
            spans(&r.kept)
        ));
        text.push_str(&format!("lost: {} seqs\n", r.lost_seqs));
    }
    for l in &r.lost {
        text.push_str(&format!(
            "  seqs {}-{}: damage at {}: {}\n",
            l.from,
            l.to,
            r.position(l.offset),
            l.reason
        ));
    }
    for c in &r.commits {
        let id =
            c.id.clone()
                .or_else(|| c.id_sha256.as_ref().map(|h| format!("sha256:{h}")))
                .unwrap_or_else(|| "(no id)".into());
        text.push_str(&format!(
            "commit at seq {} {id}: {}\n",
            c.first_seq, c.outcome
        ));
    }
    for a in &r.artifacts_lost {
        text.push_str(&format!(
            "artifact lost: {a} (its tool result keeps its excerpt and says so)\n"
        ));
    }
    for a in &r.artifacts_saved_aside {
        text.push_str(&format!(
            "unreferenced artifact: {a} (moved to {})\n",
            r.artifact_saved_as(a)
        ));
    }
    for s in &r.saved_aside {
        text.push_str(&format!(
            "saved aside: {} bytes from {}{}\n",
            s.bytes,
            r.position(s.offset),
            s.file
                .as_ref()
                .map(|f| format!(" to {f}"))
                .unwrap_or_default()
        ));
    }
    if r.needed && !r.applied {
        text.push_str(&format!(
            "run `ctxlog repair {conv} --accept-loss` to carry it out: lost seqs get a loss \
             record and are never reused\n"
        ));
    }
    text
}

/// The human-readable verify report: a summary line, then one line per finding.
fn verify_text(response: &VerifyResponse) -> String {
    let report = &response.ledger;
    let mut text = format!(
        "{}: {} events (last seq {}), {} bytes, {} artifacts\n",
        match response.verdict {
            ctxlog::ops::Verdict::Ok => "ok",
            ctxlog::ops::Verdict::Attention => "needs attention",
            ctxlog::ops::Verdict::Damaged => "found problems",
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
    if report.lost > 0 {
        text.push_str(&format!(
            "lost: {} seqs covered by loss records (damage given up by a repair; `ctxlog log` shows when and why)\n",
            report.lost
        ));
    }
    if report.torn_tail_bytes > 0 {
        text.push_str(&format!(
            "torn tail: {} bytes after the last complete commit ({}); the next writer cuts them and saves them under recovered/\n",
            report.torn_tail_bytes,
            report.torn_tail_reason.as_deref().unwrap_or("incomplete")
        ));
    }
    if report.in_progress_bytes > 0 {
        text.push_str(&format!(
            "in progress: {} bytes after the last complete commit are a commit a writer is appending; checked up to the last commit complete when verify started\n",
            report.in_progress_bytes
        ));
    }
    if !report.recovered.is_empty() {
        text.push_str(&format!(
            "recovered: {} file(s) kept for forensics (bytes cut by earlier opens or saved aside by a repair): {}\n",
            report.recovered.len(),
            report.recovered.join(", ")
        ));
    }
    for problem in &report.artifact_problems {
        text.push_str(&format!("artifact: {problem}\n"));
    }
    for orphan in &report.orphaned_artifacts {
        text.push_str(&format!(
            "orphaned artifact: {orphan} (no event references it; the next erasure deletes it)\n"
        ));
    }
    for leftover in &report.leftovers {
        text.push_str(&format!(
            "leftover: {leftover} (an interrupted operation's; the next writer open finishes or removes it)\n"
        ));
    }
    if let Some(problem) = &report.sidecar_problem {
        text.push_str(&format!(
            "sidecar index: {problem} (a cache, rebuildable from the log)\n"
        ));
    }
    match &response.recall_index {
        RecallIndexCheck::Absent => {
            text.push_str("recall index: none yet (built on the first recall)\n")
        }
        RecallIndexCheck::Ok { pages } => {
            text.push_str(&format!("recall index: ok, {pages} pages\n"))
        }
        RecallIndexCheck::Damaged { problem } => text.push_str(&format!(
            "{problem} (a cache: the ledger is intact; until then recall may miss pages)\n"
        )),
        RecallIndexCheck::Unchecked { reason } => {
            text.push_str(&format!("recall index: not checked: {reason}\n"))
        }
    }
    text
}

fn project(store: &Store, args: ProjectArgs) -> Result<(), Failure> {
    let tools = match &args.tools {
        None => Vec::new(),
        Some(path) => ctxlog::json::from_slice::<Vec<serde_json::Value>>(&read_input(
            path,
            ctxlog::ops::MAX_INPUT_BYTES,
        )?)
        .map_err(|e| {
            Failure::other(format!(
                "--tools {}: expected a JSON array of tool definitions: {e}",
                path.display()
            ))
        })?,
    };
    let request = ProjectRequest {
        conversation: args.conversation,
        input: args.input,
        system: args.system,
        model: args.model,
        format: args.format,
        max_bytes: args.max_bytes,
        max_tokens: args.max_tokens,
        tokenizer: args.tokenizer,
        reserve_output: args.reserve_output,
        policy: args.policy,
        recall: args.recall,
        recall_reserve: args.recall_reserve,
        notice: args.notice,
        window: args.window,
        low_water: args.low_water,
        cache_hints: args.cache_hints,
        tools,
        recall_tool: args.recall_tool,
        fields: serde_json::Map::new(),
        stored_input: false,
    };
    // Without --report only the body and the notes are read: no token figures are counted
    // for a byte budget, so no tokenizer is built.
    let projection = match args.report {
        Some(_) => store.project(&request)?,
        None => store.project_body(&request)?,
    };
    for note in &projection.report.notes {
        eprintln!("ctxlog: note: {note}");
    }
    if let Some(path) = &args.report {
        let mut report = serde_json::to_vec_pretty(&projection.report)
            .map_err(|e| Failure::other(e.to_string()))?;
        report.push(b'\n');
        std::fs::write(path, report)
            .map_err(|e| Failure::other(format!("cannot write {}: {e}", path.display())))?;
    }
    output::stdout(&projection.body)
}

fn count(store: &Store, args: CountArgs) -> Result<(), Failure> {
    let request = CountRequest {
        body: read_input(&args.file, ctxlog::ops::MAX_INPUT_BYTES)?,
        format: args.format,
        tokenizer: args.tokenizer,
    };
    output::json_line(&store.count(&request)?)
}

fn recall(store: &Store, args: RecallArgs) -> Result<(), Failure> {
    let result = store.recall(&RecallRequest {
        conversation: args.conversation,
        query: args.query,
        seq: args.seq,
        offset: args.offset,
        limit: args.limit,
    })?;
    output::json_line(&result)
}

fn reindex(store: &Store, args: ConvArg) -> Result<(), Failure> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("indexing {bar:40} {pos}/{len} events ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let request = ReindexRequest {
        conversation: args.conversation,
    };
    let stats = store.reindex(&request, &mut |p| {
        bar.set_length(p.head_seq);
        bar.set_position(p.seq);
    })?;
    bar.finish_and_clear();
    output::json_line(&stats)
}

fn erase(store: &Store, args: EraseArgs) -> Result<(), Failure> {
    let target = EraseTarget::choose(args.seqs, args.turn, args.last, args.all)?;
    let response = store.erase(&EraseRequest {
        conversation: args.conversation,
        target,
        reason: args.reason,
    })?;
    output::json_line(&response)
}

fn gc(store: &Store, args: GcArgs) -> Result<(), Failure> {
    let response = store.gc(&GcRequest {
        conversation: args.conversation.filter(|_| !args.all),
        older_than: args.older_than,
        keep_turns: args.keep_turns,
        max_bytes: args.max_bytes,
        include_pinned: args.include_pinned,
        dry_run: args.dry_run,
    })?;
    output::json_line(&response)
}

fn list(store: &Store, json: bool) -> Result<(), Failure> {
    let list = store.list(&ListRequest {})?;
    if json {
        return output::json_line(&list);
    }
    let mut out = String::new();
    for c in &list.conversations {
        if let Some(damage) = &c.damage {
            out.push_str(&format!(
                "{:<24}  damaged: {damage} (run `ctxlog verify {}`)\n",
                c.name, c.name
            ));
            continue;
        }
        out.push_str(&format!(
            "{:<24}  {:>8} events  {:>12} bytes  {}\n",
            c.name,
            c.events,
            c.bytes,
            utc(c.last_activity_ms)
        ));
    }
    output::stdout(out.as_bytes())
}

fn export(store: &Store, args: ExportArgs) -> Result<(), Failure> {
    let mut out = Vec::new();
    store.export(
        &ExportRequest {
            conversation: args.conversation,
            salvage: args.salvage,
        },
        &mut out,
    )?;
    output::stdout(&out)
}

/// Inputs with at least this many events show a progress bar (on a terminal only).
const PROGRESS_FROM_EVENTS: u64 = 2_000;

fn import(store: &Store, args: ImportArgs) -> Result<(), Failure> {
    let format: ctxlog::transfer::ImportFormat = args.format.parse()?;
    let (conversation, file) = match args.args.as_slice() {
        [file] => (None, file.clone()),
        [conv, file] => (Some(conv.clone()), file.clone()),
        _ => {
            return Err(Failure::with_code(
                2,
                "usage",
                "usage: ctxlog import [CONV] FILE",
            ));
        }
    };
    let data = read_input(Path::new(&file), ctxlog::ops::MAX_IMPORT_BYTES)?;
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("importing {bar:40} {pos}/{len} events ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let request = ImportRequest {
        conversation,
        format,
    };
    let response = store.import(&request, &data, &mut |p| {
        if p.total >= PROGRESS_FROM_EVENTS {
            bar.set_length(p.total);
            bar.set_position(p.done);
        }
    })?;
    bar.finish_and_clear();
    output::json_line(&response)?;
    if response.failed.is_empty() {
        return Ok(());
    }
    let refused: Vec<String> = response
        .failed
        .iter()
        .map(|f| format!("{}: {}", f.conversation, f.error))
        .collect();
    Err(Failure::with_code(
        1,
        "partly_imported",
        format!(
            "{} of {} samples refused, nothing of them written ({}); the other {} imported",
            response.failed.len(),
            response.failed.len() + response.conversations.len(),
            refused.join("; "),
            response.conversations.len()
        ),
    ))
}

fn serve(
    location: ctxlog::StoreLocation,
    config: ctxlog::StoreConfig,
    args: ServeArgs,
) -> Result<(), Failure> {
    ctxlog_server::serve(ctxlog_server::ServeOptions {
        addr: args.addr,
        location,
        config,
        tokens_file: args.tokens,
        body_limit: usize::try_from(args.body_limit_mib << 20).unwrap_or(usize::MAX),
        writer_wait: std::time::Duration::from_secs(args.writer_wait),
        allowed_origins: args.allow_origins,
        connections: ctxlog_server::ConnectionLimits {
            header_timeout: std::time::Duration::from_secs(args.header_timeout_secs),
            body_timeout: std::time::Duration::from_secs(args.body_timeout_secs),
            max_connections: args.max_connections,
        },
    })
    .map_err(|e| Failure::other(format!("serve: {e:#}")))
}

fn gateway(
    location: ctxlog::StoreLocation,
    store: ctxlog::StoreConfig,
    args: GatewayArgs,
) -> Result<(), Failure> {
    let mut config = ctxlog_gateway::Config::new(location);
    config.store = store;
    config.openai_upstream = args.openai_upstream;
    config.anthropic_upstream = args.anthropic_upstream;
    config.connect_timeout = std::time::Duration::from_secs(args.connect_timeout);
    config.upstream_timeout = std::time::Duration::from_secs(args.upstream_timeout);
    config.body_limit = usize::try_from(args.body_limit_mib << 20).unwrap_or(usize::MAX);
    config.log_json = args.log_format == "json";
    config.recall_calls = args.recall_tool.then_some(args.recall_calls);
    config.recognition_cache = args.recognition_cache;
    config.model_windows = args.model_windows;
    ctxlog_gateway::serve(ctxlog_gateway::GatewayOptions {
        addr: args.addr,
        tokens_file: args.tokens,
        config,
    })
    .map_err(|e| Failure::other(format!("gateway: {e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_neutralize_controls_and_bidi_overrides() {
        assert_eq!(preview("a\u{202E}b\u{1b}[31mc\u{2066}d"), "a b [31mc d");
    }

    #[test]
    fn repair_text_words_positions_and_destinations_as_the_plan_says() {
        use ctxlog::ops::{LostRun, SavedAside, SavedTo};
        let plan = |saved_to| RepairResponse {
            needed: true,
            lost: vec![LostRun {
                from: 8,
                to: 8,
                offset: 8,
                reason: "row missing".into(),
            }],
            saved_aside: vec![SavedAside {
                offset: 8,
                bytes: 40,
                file: None,
            }],
            artifacts_saved_aside: vec!["sha256-ab".into()],
            saved_to,
            ..RepairResponse::default()
        };
        let rows = repair_text(
            "chat",
            &plan(SavedTo::Table {
                table: "s.recovered".into(),
            }),
        );
        assert!(
            rows.contains("seqs 8-8: damage at seq 8: row missing"),
            "{rows}"
        );
        assert!(
            rows.contains("saved aside: 40 bytes from seq 8\n"),
            "{rows}"
        );
        assert!(
            rows.contains("unreferenced artifact: sha256-ab (moved to s.recovered)"),
            "{rows}"
        );
        assert!(
            !rows.contains("byte offset") && !rows.contains("recovered/"),
            "{rows}"
        );
        let files = repair_text("chat", &plan(SavedTo::default()));
        assert!(files.contains("damage at byte offset 8"), "{files}");
        assert!(files.contains("40 bytes from byte offset 8"), "{files}");
        assert!(
            files.contains("(moved to recovered/artifact-sha256-ab)"),
            "{files}"
        );
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_999), "2000-02-29T00:00:00Z");
    }
}
