//! Projection invariants (docs/design.md#5-projection) on random well-formed histories and budgets:
//! when `ctxlog_projection::project` returns a body, `body.len() <= max_bytes`, `report.bytes ==
//! body.len()`, the body is valid JSON, and a token budget is kept.
#![no_main]

use arbitrary::Arbitrary;
use ctxlog_event::{Event, EventBody, ToolStatus};
use ctxlog_projection::{
    Policy, ProjectionRequest, SizeCache, SliceHistory, Tokenizer, WireFormat, project,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Step {
    Text(String),
    Tool { name: u8, output: String, status: u8, exit: Option<i8> },
    Note { text: String, pinned: bool },
}

#[derive(Arbitrary, Debug)]
struct Turn {
    user: String,
    steps: Vec<Step>,
    reply: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    turns: Vec<Turn>,
    system: Option<String>,
    input: String,
    max_bytes: Option<u16>,
    max_tokens: Option<u16>,
    reserve: Option<u8>,
    anthropic: bool,
    cl100k: bool,
    agent: bool,
    notice: bool,
}

fn history(turns: &[Turn]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut push = |body: EventBody| {
        let seq = out.len() as u64 + 1;
        out.push(Event { seq, ts_ms: 1_700_000_000_000 + seq as i64, body });
    };
    for (t, turn) in turns.iter().take(24).enumerate() {
        push(EventBody::User {
            text: turn.user.clone(),
            parts: Vec::new(),
            provider_item: None,
        });
        for (s, step) in turn.steps.iter().take(6).enumerate() {
            match step {
                Step::Text(text) => push(EventBody::Assistant { text: text.clone(), provider_item: None }),
                Step::Tool { name, output, status, exit } => {
                    let call_id = format!("c{t}-{s}");
                    let tool = format!("tool{}", name % 3);
                    push(EventBody::ToolCall {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        arguments: serde_json::json!({"n": s}),
                        provider_item: None,
                    });
                    let status = match status % 3 {
                        0 => ToolStatus::Ok,
                        1 => ToolStatus::Error,
                        _ => ToolStatus::Interrupted,
                    };
                    push(EventBody::ToolResult {
                        call_id,
                        tool,
                        status,
                        exit_code: exit.map(i64::from),
                        text: output.clone(),
                        artifact: None,
                        parts: Vec::new(),
                        provider_item: None,
                    });
                }
                Step::Note { text, pinned } => push(EventBody::Note {
                    text: text.clone(),
                    pinned: *pinned,
                    supersedes: None,
                    provider_item: None,
                }),
            }
        }
        if let Some(reply) = &turn.reply {
            push(EventBody::Assistant { text: reply.clone(), provider_item: None });
        }
    }
    out
}

fuzz_target!(|inp: Input| {
    let events = history(&inp.turns);
    let mut b = ProjectionRequest::builder();
    b.input(inp.input.clone()).notice(inp.notice);
    if let Some(s) = &inp.system {
        b.system(s.clone());
    }
    if let Some(m) = inp.max_bytes {
        b.max_bytes(u64::from(m));
    }
    if let Some(t) = inp.max_tokens {
        b.max_tokens(u64::from(t));
    }
    if let Some(r) = inp.reserve {
        b.reserve_output(u64::from(r));
    }
    b.format(if inp.anthropic { WireFormat::AnthropicMessages } else { WireFormat::OpenAiChat });
    b.tokenizer(if inp.cl100k { Tokenizer::Cl100k } else { Tokenizer::O200k });
    b.policy(if inp.agent { Policy::Agent } else { Policy::Turns });
    let Ok(request) = b.build() else {
        return;
    };
    let mut cache = SizeCache::new();
    let Ok(p) = project(&SliceHistory::new(&events), &request, &mut cache) else {
        return;
    };
    if let Some(m) = inp.max_bytes {
        assert!(p.body.len() as u64 <= u64::from(m), "body {} > max_bytes {m}", p.body.len());
    }
    assert_eq!(p.report.bytes, p.body.len() as u64);
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&p.body) {
        panic!("body is not JSON: {e}");
    }
    if let Some(t) = inp.max_tokens {
        let reserve = inp.reserve.map(u64::from).unwrap_or(0);
        let tokens = p.report.tokens;
        assert!(tokens + reserve <= u64::from(t), "tokens {tokens} + reserve {reserve} > {t}");
    }
});
