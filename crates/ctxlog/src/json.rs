//! Untrusted JSON, kept exactly or refused: every JSON text that enters a store (a commit's
//! turn, an operation's request body, an import's input) is read here, so that what is
//! stored, projected and shown to a model later is what the caller wrote, never a silently
//! changed version of it.
//!
//! # What is refused
//!
//! On top of the JSON grammar, a text is refused when it holds:
//!
//! - **a key twice in one object** (`{"user":"a","user":"b"}`, at any depth; keys compare
//!   after their escapes are decoded, so `"a"` and `"\u0061"` are the same key): a parser
//!   keeps one of them and drops the other without a word;
//! - **an integer beyond 64 bits**: a number without fraction or exponent outside
//!   -9223372036854775808 to 18446744073709551615 (`123456789012345678901234567890`): it
//!   could only be stored as a 64-bit float, which keeps 17 of its digits;
//! - **a decimal a 64-bit float does not keep**: a number with a fraction or an exponent is
//!   stored as the nearest 64-bit float, and written back as that float's shortest form; it
//!   is refused when that form is not the same number as written (trailing zeros and the
//!   choice of exponent aside: `1.50`, `1.5` and `15e-1` are one number). So every decimal
//!   of up to 15 significant digits within the float range is kept, and so is every number
//!   a program printed from a 64-bit float (`0.30000000000000004`); a decimal with more
//!   digits than its float keeps (`3.14159265358979323846`, `0.10000000000000001`), one
//!   beyond the float range (`1e400`) or too small for it (`1e-400`, stored as 0) is
//!   refused.
//!
//! The error names where (the JSON path, `$` the whole text, and the byte offset) and what to
//! do instead: send each key once; send a number a float does not keep as a string.
//!
//! # Cost
//!
//! One pass over the text before it is parsed: strings are skipped with `memchr`, numbers
//! are checked where they stand, and the only memory kept is the keys of the objects open at
//! a time (borrowed from the text, copied only when they hold escapes) and one entry per
//! open object or array. Text the parser will refuse anyway (malformed, or nested deeper than
//! its limit of 128) is left to the parser's own error.

use std::borrow::Cow;

use serde::de::DeserializeOwned;

/// The deepest nesting the check follows: `serde_json`'s own limit, past which it refuses
/// the text.
const MAX_DEPTH: usize = 128;

/// The most significant digits a 64-bit float's shortest form has.
const MAX_FLOAT_DIGITS: usize = 17;

/// Parses `text` as JSON into `T` after checking that it can be kept exactly (see the module
/// docs): the drop-in for `serde_json::from_str` wherever JSON comes from outside.
///
/// ```
/// let kept: serde_json::Value = ctxlog::json::from_str(r#"{"n":1.5,"big":18446744073709551615}"#).unwrap();
/// assert_eq!(kept["big"], 18446744073709551615u64);
/// let err = ctxlog::json::from_str::<serde_json::Value>(r#"{"user":"a","user":"b"}"#).unwrap_err();
/// assert!(err.to_string().starts_with("key \"user\" appears twice"), "{err}");
/// ```
///
/// # Errors
/// A `serde_json::Error`: the parser's own for malformed text, or one saying what cannot be
/// kept exactly, where, and what to send instead.
pub fn from_str<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    if let Err(inexact) = Scanner::new(text).run() {
        return Err(serde::de::Error::custom(inexact));
    }
    serde_json::from_str(text)
}

/// [`from_str`] for bytes: text that is not UTF-8 gets the parser's own error.
///
/// # Errors
/// As [`from_str`].
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// What cannot be kept exactly, and where.
#[derive(Debug)]
struct Inexact {
    /// The byte offset of the key or number.
    offset: usize,
    /// The JSON path of the value (for a repeated key, of its object).
    path: String,
    kind: InexactKind,
}

#[derive(Debug)]
enum InexactKind {
    DuplicateKey(String),
    WideInteger(String),
    Decimal {
        written: String,
        stored: Option<f64>,
    },
}

impl std::fmt::Display for Inexact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = format!("at {} (byte {})", self.path, self.offset);
        match &self.kind {
            InexactKind::DuplicateKey(key) => write!(
                f,
                "key {} appears twice in the object {at}: one would silently replace the \
                 other; give each key once",
                shown(&serde_json::Value::from(key.as_str()).to_string())
            ),
            InexactKind::WideInteger(n) => write!(
                f,
                "the integer {} {at} is beyond 64 bits (-9223372036854775808 to \
                 18446744073709551615) and would be stored as the float {}, losing digits; \
                 send a number this large as a string to keep it exactly",
                shown(n),
                float_text(n.parse().ok())
            ),
            InexactKind::Decimal { written, stored } => write!(
                f,
                "the number {} {at} would be stored as the 64-bit float {}, not as written \
                 (such a float keeps 15 to 17 significant digits, magnitudes from 5e-324 to \
                 1.8e308); send it as a string to keep it exactly, or round it",
                shown(written),
                float_text(*stored)
            ),
        }
    }
}

/// `text` as shown in a message: cut after 40 characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}… ({} characters)", &text[..cut], text.chars().count()),
        None => text.to_string(),
    }
}

/// A float as the store would write it (none or infinite: out of range).
fn float_text(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        Some(v) => serde_json::Value::from(v).to_string(),
        None => "infinity (out of range)".into(),
    }
}

/// An open object or array.
enum Frame {
    /// Its keys are `keys[start..]` (up to the next open object's start).
    Object { start: usize },
    /// The index of the element being read.
    Array { index: usize },
}

/// One pass over a JSON text: the structure, each object's keys, each number.
struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    frames: Vec<Frame>,
    /// The keys of every open object, each with its byte offset.
    keys: Vec<(Cow<'a, str>, usize)>,
}

/// Why a scan stopped early.
enum Stop {
    /// The text is not JSON the parser accepts: its error says why.
    Malformed,
    Inexact(Inexact),
}

impl From<Inexact> for Stop {
    fn from(e: Inexact) -> Stop {
        Stop::Inexact(e)
    }
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            frames: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// Checks the whole text; malformed text passes (the parser refuses it).
    fn run(mut self) -> Result<(), Inexact> {
        match self.values() {
            Ok(()) | Err(Stop::Malformed) => Ok(()),
            Err(Stop::Inexact(e)) => Err(e),
        }
    }

    /// Reads values until the top-level one ends.
    fn values(&mut self) -> Result<(), Stop> {
        loop {
            self.skip_ws();
            if self.value()? {
                continue; // an object or array was opened: its first member follows
            }
            loop {
                self.skip_ws();
                let next = self.peek();
                match (self.frames.last_mut(), next) {
                    (None, _) => return Ok(()),
                    (Some(Frame::Array { index }), Some(b',')) => {
                        *index += 1;
                        self.pos += 1;
                        break;
                    }
                    (Some(Frame::Object { .. }), Some(b',')) => {
                        self.pos += 1;
                        self.key()?;
                        break;
                    }
                    (Some(Frame::Array { .. }), Some(b']')) => self.close()?,
                    (Some(Frame::Object { .. }), Some(b'}')) => self.close()?,
                    _ => return Err(Stop::Malformed),
                }
            }
        }
    }

    /// Reads the value at the cursor; true when it opened a non-empty object or array.
    fn value(&mut self) -> Result<bool, Stop> {
        let Some(b) = self.peek() else {
            return Err(Stop::Malformed);
        };
        match b {
            b'{' | b'[' => return self.open(b),
            b'"' => {
                self.string()?;
            }
            b'-' | b'0'..=b'9' => self.number()?,
            b't' | b'f' | b'n' => {
                while self.peek().is_some_and(|b| b.is_ascii_lowercase()) {
                    self.pos += 1;
                }
            }
            _ => return Err(Stop::Malformed),
        }
        Ok(false)
    }

    /// Opens an object or array; an empty one is closed at once (false).
    fn open(&mut self, b: u8) -> Result<bool, Stop> {
        if self.frames.len() >= MAX_DEPTH {
            return Err(Stop::Malformed);
        }
        self.pos += 1;
        self.skip_ws();
        let (frame, end) = match b {
            b'{' => (
                Frame::Object {
                    start: self.keys.len(),
                },
                b'}',
            ),
            _ => (Frame::Array { index: 0 }, b']'),
        };
        self.frames.push(frame);
        if self.peek() == Some(end) {
            self.close()?;
            return Ok(false);
        }
        if b == b'{' {
            self.key()?;
        }
        Ok(true)
    }

    /// Closes the innermost object or array at the cursor; an object's keys are checked.
    fn close(&mut self) -> Result<(), Stop> {
        self.pos += 1;
        if let Some(Frame::Object { start }) = self.frames.last() {
            let start = *start;
            if let Some((key, offset)) = repeated(&mut self.keys[start..]) {
                let key = key.to_string();
                let depth = self.frames.len() - 1;
                return Err(self
                    .inexact(offset, depth, InexactKind::DuplicateKey(key))
                    .into());
            }
            self.keys.truncate(start);
        }
        self.frames.pop();
        Ok(())
    }

    /// Reads a key and its colon.
    fn key(&mut self) -> Result<(), Stop> {
        self.skip_ws();
        let offset = self.pos;
        if self.peek() != Some(b'"') {
            return Err(Stop::Malformed);
        }
        let (raw, escaped) = self.string()?;
        let key = if escaped {
            // Decoded, so that "a" and "\u0061" are one key (a copy only for such keys).
            let decoded = serde_json::from_str::<String>(raw).map_err(|_| Stop::Malformed)?;
            Cow::Owned(decoded)
        } else {
            Cow::Borrowed(&raw[1..raw.len() - 1])
        };
        self.keys.push((key, offset));
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(Stop::Malformed);
        }
        self.pos += 1;
        Ok(())
    }

    /// Skips a string at the cursor (its opening quote); returns it as written, quotes
    /// included, and whether it holds escapes.
    fn string(&mut self) -> Result<(&'a str, bool), Stop> {
        let start = self.pos;
        let mut at = start + 1;
        let mut escaped = false;
        loop {
            let rest = self.bytes.get(at..).ok_or(Stop::Malformed)?;
            let found = memchr::memchr2(b'"', b'\\', rest).ok_or(Stop::Malformed)?;
            at += found;
            if self.bytes[at] == b'"' {
                break;
            }
            escaped = true;
            at += 2;
        }
        self.pos = at + 1;
        let raw = self.text.get(start..=at).ok_or(Stop::Malformed)?;
        Ok((raw, escaped))
    }

    /// Reads a number at the cursor and checks that it is kept as written.
    fn number(&mut self) -> Result<(), Stop> {
        let start = self.pos;
        let number = Number::scan(&self.bytes[start..]).ok_or(Stop::Malformed)?;
        self.pos += number.len;
        let text = &self.text[start..self.pos];
        let kind = if number.integer {
            if integer_fits(text) {
                return Ok(());
            }
            InexactKind::WideInteger(text.to_string())
        } else {
            let stored = text.parse::<f64>().ok();
            if stored.is_some_and(|v| v.is_finite() && same_decimal(text, v)) {
                return Ok(());
            }
            InexactKind::Decimal {
                written: text.to_string(),
                stored,
            }
        };
        Err(self.inexact(start, self.frames.len(), kind).into())
    }

    /// The error for `kind` at `offset`, in the value `depth` frames deep.
    fn inexact(&self, offset: usize, depth: usize, kind: InexactKind) -> Inexact {
        Inexact {
            offset,
            path: self.path(depth),
            kind,
        }
    }

    /// The JSON path through the outermost `depth` open frames: an array's element index, an
    /// object's current key (the newest of its keys).
    fn path(&self, depth: usize) -> String {
        let mut path = String::from("$");
        for (i, frame) in self.frames.iter().enumerate().take(depth) {
            match frame {
                Frame::Array { index } => path.push_str(&format!("[{index}]")),
                Frame::Object { start } => {
                    let end = self.frames[i + 1..]
                        .iter()
                        .find_map(|f| match f {
                            Frame::Object { start } => Some(*start),
                            Frame::Array { .. } => None,
                        })
                        .unwrap_or(self.keys.len());
                    if let Some((key, _)) = self.keys.get(*start..end).and_then(<[_]>::last) {
                        push_key(&mut path, key);
                    }
                }
            }
        }
        path
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }
}

/// `.key`, or `["key"]` for a key that is not a plain name.
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&shown(&serde_json::Value::from(key).to_string()));
        path.push(']');
    }
}

/// A key that occurs twice among `keys` (sorted in place), with the offset of its later
/// occurrence.
fn repeated<'k>(keys: &'k mut [(Cow<'_, str>, usize)]) -> Option<(&'k str, usize)> {
    if keys.len() < 2 {
        return None;
    }
    keys.sort_unstable();
    keys.windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .min_by_key(|w| w[1].1)
        .map(|w| (&*w[1].0, w[1].1))
}

/// The grammar of one JSON number.
struct Number {
    len: usize,
    /// Neither fraction nor exponent.
    integer: bool,
}

impl Number {
    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` at the start of `b`; none when the
    /// text there is not a JSON number.
    fn scan(b: &[u8]) -> Option<Number> {
        let digits = |from: usize| {
            b[from.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
        };
        let mut at = usize::from(b.first() == Some(&b'-'));
        let int = digits(at);
        if int == 0 || (int > 1 && b[at] == b'0') {
            return None;
        }
        at += int;
        let mut integer = true;
        if b.get(at) == Some(&b'.') {
            let frac = digits(at + 1);
            if frac == 0 {
                return None;
            }
            at += 1 + frac;
            integer = false;
        }
        if matches!(b.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(b.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let exp = digits(at);
            if exp == 0 {
                return None;
            }
            at += exp;
            integer = false;
        }
        Some(Number { len: at, integer })
    }
}

/// True when the integer `text` is stored as an integer: it fits in an `i64` (negative) or a
/// `u64`; `-0` is stored as `-0.0`, the same number.
fn integer_fits(text: &str) -> bool {
    match text.strip_prefix('-') {
        Some("0") => true,
        Some(_) => text.parse::<i64>().is_ok(),
        None => text.parse::<u64>().is_ok(),
    }
}

/// True when the decimal `text` and the float `value` (parsed from it) are the same number:
/// `value` as the store writes it (`serde_json`'s shortest form) has the same significant
/// digits and exponent as `text`.
fn same_decimal(text: &str, value: f64) -> bool {
    use serde_json::ser::Formatter;
    let mut buf = [0u8; 32];
    let mut out: &mut [u8] = &mut buf;
    if serde_json::ser::CompactFormatter
        .write_f64(&mut out, value)
        .is_err()
    {
        return false;
    }
    let len = 32 - out.len();
    match (Decimal::of(text.as_bytes()), Decimal::of(&buf[..len])) {
        (Some(written), Some(stored)) => written == stored,
        _ => false,
    }
}

/// A number's significant digits (no leading or trailing zeros, at most
/// [`MAX_FLOAT_DIGITS`]) and the decimal exponent of the first: `d1.d2d3… × 10^exp`. Zero
/// has no digits, its sign and exponent do not count.
#[derive(PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: [u8; MAX_FLOAT_DIGITS],
    len: usize,
    exp: i64,
}

impl Decimal {
    /// `text` in JSON's number syntax; none when it has more significant
    /// digits than any float's shortest form.
    fn of(text: &[u8]) -> Option<Decimal> {
        let negative = text.first() == Some(&b'-');
        let body = &text[usize::from(negative)..];
        let end = body
            .iter()
            .position(|b| matches!(b, b'e' | b'E'))
            .unwrap_or(body.len());
        let (mantissa, exponent) = body.split_at(end);
        let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
            Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
            None => (mantissa, &[][..]),
        };
        let digit = |i: usize| int.get(i).or_else(|| frac.get(i - int.len())).copied();
        let n = int.len() + frac.len();
        let Some(first) = (0..n).find(|&i| digit(i) != Some(b'0')) else {
            return Some(Decimal::ZERO);
        };
        let last = (0..n)
            .rev()
            .find(|&i| digit(i) != Some(b'0'))
            .unwrap_or(first);
        if last - first >= MAX_FLOAT_DIGITS {
            return None;
        }
        let mut out = Decimal {
            negative,
            digits: [0; MAX_FLOAT_DIGITS],
            len: last - first + 1,
            exp: exponent_value(exponent).saturating_add(int.len() as i64 - 1 - first as i64),
        };
        for (slot, i) in out.digits.iter_mut().zip(first..=last) {
            *slot = digit(i).unwrap_or(b'0');
        }
        Some(out)
    }

    const ZERO: Decimal = Decimal {
        negative: false,
        digits: [0; MAX_FLOAT_DIGITS],
        len: 0,
        exp: 0,
    };
}

/// The value of an exponent part (`e-7`, `E+10`, or none), saturating.
fn exponent_value(part: &[u8]) -> i64 {
    let part = part.get(1..).unwrap_or_default();
    let (negative, digits) = match part.first() {
        Some(b'-') => (true, &part[1..]),
        Some(b'+') => (false, &part[1..]),
        _ => (false, part),
    };
    let magnitude = digits.iter().fold(0i64, |n, d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    });
    if negative { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn check(text: &str) -> Result<(), String> {
        from_str::<Value>(text).map(drop).map_err(|e| e.to_string())
    }

    #[test]
    fn repeated_keys_are_refused_at_any_depth_with_their_path() {
        for (text, key, path) in [
            (r#"{"user":"a","user":"b"}"#, "user", "$ (byte 12)"),
            (
                r#"{"events":[{"kind":"user","text":"x","kind":"note"}]}"#,
                "kind",
                "$.events[0] (byte 37)",
            ),
            (
                r#"{"events":[{"kind":"tool_call","arguments":{"a b":{"x":1,"x":2}}}]}"#,
                "x",
                r#"$.events[0].arguments["a b"] (byte 57)"#,
            ),
            (r#"{"a":1,"\u0061":2}"#, "a", "$ (byte 7)"),
            (r#"[{}, {"k":[1,{"z":0}], "k":0}]"#, "k", "$[1] (byte 23)"),
        ] {
            let err = check(text).unwrap_err();
            assert!(
                err.starts_with(&format!(
                    "key \"{key}\" appears twice in the object at {path}"
                )),
                "{text}: {err}"
            );
            assert!(err.contains("give each key once"), "{err}");
        }
        // The same key in different objects is fine.
        check(r#"{"a":{"a":1},"b":[{"a":1},{"a":2}],"c":{"a":{"a":0}}}"#).unwrap();
    }

    #[test]
    fn integers_beyond_64_bits_are_refused() {
        let err = check(r#"{"events":[{"arguments":{"n":123456789012345678901234567890}}]}"#)
            .unwrap_err();
        assert!(
            err.starts_with(
                "the integer 123456789012345678901234567890 at $.events[0].arguments.n (byte 29) \
                 is beyond 64 bits"
            ),
            "{err}"
        );
        assert!(
            err.contains("1.2345678901234568e+29") && err.contains("as a string"),
            "{err}"
        );
        for bad in [
            "18446744073709551616",
            "-9223372036854775809",
            "[1e2, 100000000000000000000]",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        for good in [
            "18446744073709551615",
            "-9223372036854775808",
            "0",
            "-0",
            "[-1, 7]",
        ] {
            let value: Value = from_str(good).unwrap();
            assert_eq!(value, serde_json::from_str::<Value>(good).unwrap());
        }
    }

    #[test]
    fn decimals_are_kept_when_their_float_reads_back_as_written() {
        for good in [
            "1.5",
            "1.50",
            "15e-1",
            "0.1",
            "0.30000000000000004",
            "123456789012345.6",
            "5e-324",
            "1.7976931348623157e308",
            "-2.5E+3",
            "0.0",
            "-0.0",
            "0e999999999999999999",
            "1e22",
            "100.0",
        ] {
            check(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in [
            "3.14159265358979323846",
            "0.10000000000000001",
            "1e400",
            "-1e400",
            "1e-400",
            "123456789012345678901234567890.0",
            "1.00000000000000000000000000001",
        ] {
            let err = check(bad).unwrap_err();
            assert!(err.starts_with("the number "), "{bad}: {err}");
            assert!(err.contains("as a string"), "{err}");
        }
        let err = check("[3.14159265358979323846]").unwrap_err();
        assert!(
            err.contains("stored as the 64-bit float 3.141592653589793"),
            "{err}"
        );
    }

    #[test]
    fn malformed_text_gets_the_parsers_error_and_deep_text_its_limit() {
        for bad in [
            "",
            "{",
            "[1,",
            r#"{"a" 1}"#,
            "01",
            "1.",
            "-",
            r#"{"a":"\x"}"#,
            "[1]x",
            "tru",
            r#""\"#,
        ] {
            let ours = from_str::<Value>(bad).unwrap_err().to_string();
            let theirs = serde_json::from_str::<Value>(bad).unwrap_err().to_string();
            assert_eq!(ours, theirs, "{bad:?}");
        }
        let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        assert!(
            from_str::<Value>(&deep)
                .unwrap_err()
                .to_string()
                .contains("recursion limit")
        );
        let deep_dup = format!("{}{{\"a\":1,\"a\":2}}{}", "[".repeat(200), "]".repeat(200));
        assert!(from_str::<Value>(&deep_dup).is_err());
    }

    #[test]
    fn long_numbers_and_keys_are_cut_in_messages() {
        let n = "9".repeat(1000);
        let err = check(&n).unwrap_err();
        assert!(
            err.contains("… (1000 characters)") && err.len() < 600,
            "{err}"
        );
    }

    /// JSON values as serde_json builds them: every number is one it keeps.
    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            ".*".prop_map(Value::from),
            "[\"\\\\a-z\\u{0}-\\u{1f}é😀]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec(("[a-c\"\\\\\\u{1}é]{0,3}", inner), 0..8)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn every_value_serde_json_writes_is_accepted_unchanged(value in values()) {
            for text in [
                serde_json::to_string(&value).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
            ] {
                let read: Value = from_str(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                prop_assert_eq!(&read, &value);
            }
        }

        #[test]
        fn a_repeated_key_is_refused_wherever_it_is(value in values(), key in "[a-z\"é]{0,4}", at in any::<prop::sample::Index>()) {
            // Give one object of the value (or a new top-level one) a key twice.
            let text = serde_json::to_string(&value).unwrap();
            let key = serde_json::to_string(&key).unwrap();
            let opens = object_opens(&text);
            let text = if opens.is_empty() {
                format!("{{{key}:1,\"x\":{text},{key}:2}}")
            } else {
                let open = opens[at.index(opens.len())];
                let rest = &text[open + 1..];
                let sep = if rest.starts_with('}') { "" } else { "," };
                format!("{}{key}:0,{key}:[]{sep}{rest}", &text[..=open])
            };
            let err = from_str::<Value>(&text).err().map(|e| e.to_string()).unwrap_or_default();
            prop_assert!(err.contains("appears twice"), "{}: {}", text, err);
        }

        #[test]
        fn an_integer_beyond_64_bits_is_refused(digits in "[1-9][0-9]{20,60}", negative: bool, value in values()) {
            let number = if negative { format!("-{digits}") } else { digits };
            let text = format!("[{},{{\"n\":{number}}}]", serde_json::to_string(&value).unwrap());
            let err = from_str::<Value>(&text).err().map(|e| e.to_string()).unwrap_or_default();
            prop_assert!(err.starts_with("the integer "), "{}: {}", text, err);
        }

        #[test]
        fn a_decimal_is_accepted_exactly_when_it_reads_back_as_the_same_number(
            int in "-?(0|[1-9][0-9]{0,20})",
            tail in "\\.[0-9]{1,20}([eE][+-]?[0-9]{1,3})?|[eE][+-]?[0-9]{1,3}",
        ) {
            let text = format!("{int}{tail}");
            let accepted = from_str::<Value>(&text).is_ok();
            // The definition, with serde_json's own parser and writer: the float it stores,
            // written back, is the same decimal number as written.
            let same = serde_json::from_str::<Value>(&text).ok().is_some_and(|v| {
                let written_back = v.to_string();
                let a = Decimal::of(text.as_bytes());
                let b = Decimal::of(written_back.as_bytes());
                a.is_some() && a == b
            });
            prop_assert_eq!(accepted, same, "{}", text);
        }
    }

    /// The offsets of the `{` that open objects in compact JSON `text`.
    fn object_opens(text: &str) -> Vec<usize> {
        let mut opens = Vec::new();
        let (mut in_string, mut escaped) = (false, false);
        for (i, b) in text.bytes().enumerate() {
            match (in_string, escaped, b) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') => in_string = false,
                (false, _, b'"') => in_string = true,
                (false, _, b'{') => opens.push(i),
                _ => {}
            }
        }
        opens
    }
}
