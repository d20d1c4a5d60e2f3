#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Images in a body are charged by the provider's published rule for the body's model
//! (docs/design.md#p14-more-wire-formats; the rules and their sources in docs/projection.md,
//! "Images"). Failure class: an image counted as the text of its base64 (a 1024 × 1024 PNG in
//! a chat body counted as thousands of tokens where gpt-4o charges 765), a rule applied to the
//! wrong model, an unreadable image counted as exact. Guarantee: `count` charges each image
//! part exactly the rule's figure (the difference with the same body without the part), at
//! each detail, in each format, for the worked examples the providers publish; an image whose
//! size ctxlog cannot read is charged the most the rule allows and flagged.

use base64::Engine as _;
use ctxlog_projection::{Tokenizer, WireFormat, count};
use serde_json::{Value, json};

/// The first bytes of a PNG of `w` × `h` pixels: signature and IHDR, all a size needs.
fn png(w: u32, h: u32) -> String {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    b.extend_from_slice(&w.to_be_bytes());
    b.extend_from_slice(&h.to_be_bytes());
    b.extend_from_slice(&[8, 6, 0, 0, 0]);
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn chat_part(w: u32, h: u32, detail: &str) -> Value {
    json!({"type":"image_url","image_url":{"url":format!("data:image/png;base64,{}", png(w, h)),"detail":detail}})
}

fn responses_part(w: u32, h: u32, detail: &str) -> Value {
    json!({"type":"input_image","image_url":format!("data:image/png;base64,{}", png(w, h)),"detail":detail})
}

fn anthropic_part(w: u32, h: u32) -> Value {
    json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":png(w, h)}})
}

/// The tokens `part` adds to a one-message body of `format` for `model`.
fn charged(
    format: WireFormat,
    model: &str,
    part: Option<Value>,
) -> (u64, ctxlog_projection::Count) {
    let text = match format {
        WireFormat::OpenAiResponses => json!({"type":"input_text","text":"What is this?"}),
        _ => json!({"type":"text","text":"What is this?"}),
    };
    let body = |parts: Vec<Value>| {
        let message = match format {
            WireFormat::OpenAiResponses => json!({"type":"message","role":"user","content":parts}),
            _ => json!({"role":"user","content":parts}),
        };
        let field = if format == WireFormat::OpenAiResponses {
            "input"
        } else {
            "messages"
        };
        let mut b = json!({"model": model});
        b[field] = json!([message]);
        serde_json::to_vec(&b).unwrap()
    };
    let without = count(&body(vec![text.clone()]), format, Tokenizer::O200k).unwrap();
    let mut parts = vec![text];
    parts.extend(part);
    let with = count(&body(parts), format, Tokenizer::O200k).unwrap();
    (with.tokens - without.tokens, with)
}

#[test]
fn openai_tiles_match_the_published_examples() {
    for format in [WireFormat::OpenAiChat, WireFormat::OpenAiResponses] {
        let part = |w, h, d| match format {
            WireFormat::OpenAiChat => chat_part(w, h, d),
            _ => responses_part(w, h, d),
        };
        // gpt-4o: 1024 × 1024 at high is 4 tiles, 85 + 4 × 170; at low, 85.
        assert_eq!(
            charged(format, "gpt-4o", Some(part(1024, 1024, "high"))).0,
            765
        );
        assert_eq!(
            charged(format, "gpt-4o", Some(part(1024, 1024, "low"))).0,
            85
        );
        // 2048 × 4096 → 1024 × 2048 → 768 × 1536: 6 tiles, 1105.
        assert_eq!(
            charged(format, "gpt-4o", Some(part(2048, 4096, "high"))).0,
            1105
        );
        // 4000 × 3000 → 2048 × 1536 → 1024 × 768: 4 tiles.
        assert_eq!(
            charged(format, "gpt-4o", Some(part(4000, 3000, "high"))).0,
            765
        );
        // auto is charged as high; other families have other constants.
        assert_eq!(
            charged(format, "gpt-4o", Some(part(1024, 1024, "auto"))).0,
            765
        );
        assert_eq!(
            charged(format, "gpt-4o-mini", Some(part(1024, 1024, "high"))).0,
            2833 + 4 * 5667
        );
        assert_eq!(
            charged(format, "o3", Some(part(1024, 1024, "high"))).0,
            75 + 4 * 150
        );
        // Patches: 1024 patches × 1.62 for gpt-4.1-mini.
        assert_eq!(
            charged(format, "gpt-4.1-mini", Some(part(1024, 1024, "high"))).0,
            1659
        );
        let (_, c) = charged(format, "gpt-4o", Some(part(1024, 1024, "high")));
        assert_eq!((c.images, c.images_estimated), (1, 0));
    }
}

#[test]
fn anthropic_area_matches_the_published_examples() {
    let model = "claude-sonnet-4-5";
    let tokens = |w, h| {
        charged(
            WireFormat::AnthropicMessages,
            model,
            Some(anthropic_part(w, h)),
        )
        .0
    };
    assert_eq!(tokens(1000, 1000), 1334);
    assert_eq!(tokens(200, 200), 54);
    assert_eq!(tokens(1092, 1092), 1590);
    assert_eq!(tokens(1024, 1024), 1399);
    // 4000 × 3000 is scaled to 1264 × 948 (long edge ≤ 1568, area ≤ 1.2 MP).
    assert_eq!(tokens(4000, 3000), 1598);
}

#[test]
fn an_image_ctxlog_cannot_read_is_charged_the_most_and_flagged() {
    let url = json!({"type":"image_url","image_url":{"url":"https://example.invalid/cat.png"}});
    let (tokens, c) = charged(WireFormat::OpenAiChat, "gpt-4o", Some(url));
    assert_eq!(tokens, 85 + 8 * 170);
    assert_eq!(
        (c.images, c.images_estimated, c.tokens_exact),
        (1, 1, false)
    );
    let url = json!({"type":"image","source":{"type":"url","url":"https://example.invalid/a.png"}});
    let (tokens, c) = charged(WireFormat::AnthropicMessages, "claude-opus-4-1", Some(url));
    assert_eq!((tokens, c.images_estimated), (1590, 1));
    // A model in no row takes its format's default rule.
    let part = chat_part(1024, 1024, "high");
    assert_eq!(
        charged(WireFormat::OpenAiChat, "my-finetune", Some(part)).0,
        765
    );
}
