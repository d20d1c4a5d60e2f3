//! The token counts of `text_tokens` (static rank tables, `src/bpe.rs`) equal `tiktoken-rs`'s
//! `encode_ordinary(..).len()` for both encodings: on hand-picked edge cases (whitespace runs,
//! look-ahead spaces, contractions, numbers, CJK, emoji, long pieces that take the heap merge)
//! and on arbitrary strings.

use ctxlog_projection::Tokenizer;
use ctxlog_projection::tokens::text_tokens;
use proptest::prelude::*;

fn reference(tokenizer: Tokenizer, text: &str) -> u64 {
    let bpe = match tokenizer {
        Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
    };
    bpe.encode_ordinary(text).len() as u64
}

#[test]
fn edge_cases_count_as_tiktoken_does() {
    let long_word = "supercalifragilistic".repeat(40);
    let long_digits = "1234567890".repeat(50);
    let long_spaces = " ".repeat(300);
    let long_bytes = "\u{1F600}".repeat(120);
    let cases = [
        "",
        " ",
        "  ",
        "\n",
        "hello world",
        "hello  world",
        "hello   \n  world  ",
        "trailing spaces   ",
        "   leading",
        "I'm sure they'll say it's John's, we've, you're, I'd",
        "I'M SURE THEY'LL",
        "12345678901234 3.14159 -42",
        "中文字符和日本語のテキスト",
        "emoji 😀👍🏽 and combining e\u{301}",
        "tabs\tand\r\nCRLF\r\n\r\n",
        "<|endoftext|> stays text",
        "path/to/file.rs:12:5 // comment\n/* block */",
        "{\"json\": [1, 2, {\"a\": null}]}",
        &long_word,
        &long_digits,
        &long_spaces,
        &long_bytes,
    ];
    for tokenizer in Tokenizer::ALL {
        for text in cases {
            assert_eq!(
                text_tokens(tokenizer, text),
                reference(tokenizer, text),
                "{tokenizer} on {text:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_counts_as_tiktoken_does(text in "\\PC{0,200}") {
        for tokenizer in Tokenizer::ALL {
            prop_assert_eq!(text_tokens(tokenizer, &text), reference(tokenizer, &text));
        }
    }

    #[test]
    fn wordy_text_counts_as_tiktoken_does(
        text in "([a-zA-Z']{1,12}|[0-9]{1,6}|[ \\t\\n]{1,4}|[.,;:!?/()\\[\\]{}\"-]{1,3}|[éüñ中文😀]){0,80}",
    ) {
        for tokenizer in Tokenizer::ALL {
            prop_assert_eq!(text_tokens(tokenizer, &text), reference(tokenizer, &text));
        }
    }
}
