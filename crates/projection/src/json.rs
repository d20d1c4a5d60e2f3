//! A small compact-JSON writer whose output we control byte for byte
//! (docs/design.md#p1-wire-formats).
//!
//! Strings are written as raw UTF-8; only `"`, `\` and the control characters U+0000–U+001F
//! are escaped (`\b \t \n \f \r` in short form, the rest as `\u00XX` with lowercase hex). This
//! is the same set and spelling `serde_json` uses, so values written through `serde_json`
//! (tool arguments, tool definitions) read the same as strings written here.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// How each byte is escaped: 0 for not at all, `u` for `\u00XX`, else the letter after the
/// backslash. The escape set is written down here only; one lookup per byte (as `serde_json`
/// does) keeps the scan over a string's plain bytes short.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `s` as a JSON string literal (with quotes) to `out`.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_str_body(out, s);
    out.push(b'"');
}

/// Appends the escaped content of `s` without quotes.
pub(crate) fn write_str_body(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = ESCAPE[usize::from(b)];
        if short == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        out.push(b'\\');
        out.push(short);
        if short == b'u' {
            out.extend_from_slice(&[
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The length of `s` once escaped, without quotes; equals what [`write_str_body`] appends.
pub(crate) fn escaped_len(s: &str) -> u64 {
    s.bytes()
        .map(|b| match ESCAPE[usize::from(b)] {
            0 => 1,
            b'u' => 6,
            _ => 2,
        })
        .sum()
}

/// Appends a JSON value compactly, keys in the value's own order.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &serde_json::Value) {
    // serde_json's compact writer escapes exactly our set and keeps map order
    // (`preserve_order` is enabled workspace-wide); writing into a Vec cannot fail.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// A JSON value as compact text (for OpenAI's `arguments` string and token counting).
pub(crate) fn value_to_string(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends a decimal integer.
pub(crate) fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_only_quote_backslash_and_controls() {
        assert_eq!(lit("a\"b\\c\nd\te\u{1}f"), r#""a\"b\\c\nd\te\u0001f""#);
        assert_eq!(lit("中文 😀 \u{7f} /"), "\"中文 😀 \u{7f} /\"");
        assert_eq!(lit("\u{8}\u{c}\r\u{1f}"), r#""\b\f\r\u001f""#);
    }

    #[test]
    fn every_byte_alone_matches_serde_json_and_its_escaped_len() {
        for c in (0u8..=127)
            .map(char::from)
            .chain(['é', '中', '😀', '\u{2028}'])
        {
            let s = c.to_string();
            assert_eq!(lit(&s), serde_json::to_string(&s).unwrap(), "{c:?}");
            assert_eq!(escaped_len(&s) + 2, lit(&s).len() as u64, "{c:?}");
        }
    }

    #[test]
    fn matches_serde_json_for_every_ascii_and_some_unicode() {
        let mut s: String = (0u8..=127).map(char::from).collect();
        s.push_str("é中😀\u{2028}");
        assert_eq!(lit(&s), serde_json::to_string(&s).unwrap());
        assert_eq!(escaped_len(&s) + 2, lit(&s).len() as u64);
    }
}
