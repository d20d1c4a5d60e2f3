//! Text handling shared by indexing and querying: pages, words, stop words, CJK grams and
//! update language.

use std::collections::HashSet;

/// Characters per page (Unicode scalar values).
pub const PAGE_CHARS: usize = 2048;
/// Characters a page repeats from the end of the previous page.
pub const PAGE_OVERLAP: usize = 128;
/// Distance between the starts of consecutive pages.
pub const PAGE_STRIDE: usize = PAGE_CHARS - PAGE_OVERLAP;

/// One page of a text: its number, its character range `[start, end)` and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageSlice<'a> {
    /// 0-based page number.
    pub page: usize,
    /// First character (inclusive), counted in Unicode scalar values.
    pub char_start: usize,
    /// Last character (exclusive).
    pub char_end: usize,
    /// The page's text.
    pub text: &'a str,
}

/// Cuts `text` into pages of [`PAGE_CHARS`] characters starting every [`PAGE_STRIDE`]
/// characters, so each page after the first repeats the last [`PAGE_OVERLAP`] characters of
/// the one before. An empty text is one empty page. The last page ends at the end of the text;
/// no page is entirely contained in the previous one.
///
/// Memory beyond the result is constant: a large artifact is walked page by page, not indexed
/// character by character.
pub fn pages(text: &str) -> Vec<PageSlice<'_>> {
    let mut out = Vec::new();
    let (mut char_start, mut byte_start) = (0, 0);
    loop {
        let rest = &text[byte_start..];
        let (chars, byte_len, next) = page_extent(rest);
        out.push(PageSlice {
            page: out.len(),
            char_start,
            char_end: char_start + chars,
            text: &rest[..byte_len],
        });
        match next {
            Some(next) if byte_len < rest.len() => {
                char_start += PAGE_STRIDE;
                byte_start += next;
            }
            _ => return out,
        }
    }
}

/// For the page that opens `rest`: its length in chars and in bytes, and the byte offset of
/// the next page's start ([`PAGE_STRIDE`] chars in), when `rest` is that long.
fn page_extent(rest: &str) -> (usize, usize, Option<usize>) {
    let mut next = None;
    for (chars, (byte, _)) in rest.char_indices().enumerate() {
        if chars == PAGE_STRIDE {
            next = Some(byte);
        }
        if chars == PAGE_CHARS {
            return (chars, byte, next);
        }
    }
    (rest.chars().count(), rest.len(), next)
}

/// True for characters of scripts written without spaces between words (Han, kana, Hangul,
/// Thai, Lao, Khmer, Myanmar …). Such runs are indexed as overlapping character bigrams.
pub fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF        // Thai, Lao
        | 0x1000..=0x109F      // Myanmar
        | 0x1780..=0x17FF      // Khmer
        | 0x3005..=0x3007      // 々 〆 〇 (iteration mark, closing mark, zero)
        | 0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3131..=0x318E      // Hangul compatibility jamo
        | 0x31F0..=0x31FF      // Katakana phonetic extensions
        | 0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF      // CJK Unified Ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0xFF66..=0xFF9F      // Half-width katakana
        | 0x20000..=0x3134F    // CJK Extensions B–G
    )
}

/// Runs of unspaced-script characters in `text`, each as a vector of chars.
fn unspaced_runs(text: &str) -> Vec<Vec<char>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for c in text.chars() {
        if is_unspaced_script(c) {
            run.push(c);
        } else if !run.is_empty() {
            runs.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// The grams of one run: overlapping bigrams, or the single character of a 1-char run.
fn run_grams(run: &[char]) -> Vec<String> {
    if run.len() == 1 {
        return vec![run[0].to_string()];
    }
    run.windows(2).map(|w| w.iter().collect()).collect()
}

/// The text stored in the `cjk` column, one token per space-separated item:
///
/// - the bigrams of every unspaced-script run, then the run's last character alone (every
///   other character starts a bigram, so a one-character query, a prefix query on that
///   character, finds any character of the text);
/// - the words glued to such a run without a space ("使用Python编程" → "python"): the index
///   tokenizer sees "使用python编程" as one token in the body, so a query for "python" could
///   not find it there.
pub fn cjk_grams(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for run in unspaced_runs(text) {
        out.extend(run_grams(&run));
        if let (true, Some(last)) = (run.len() > 1, run.last()) {
            out.push(last.to_string());
        }
    }
    out.extend(glued_words(text));
    out.join(" ")
}

/// Words that share a tokenizer token with unspaced-script characters.
fn glued_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !is_word_char(c))
        .filter(|token| token.chars().any(is_unspaced_script))
        .flat_map(words)
}

/// True for combining marks that continue a word (accents written as separate code points,
/// as in decomposed "e\u{301}lan"): the index tokenizer keeps them inside the token.
fn is_combining_mark(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F      // Combining Diacritical Marks
        | 0x1AB0..=0x1AFF    // … Extended
        | 0x1DC0..=0x1DFF    // … Supplement
        | 0x20D0..=0x20FF    // … for Symbols
        | 0xFE20..=0xFE2F    // Combining Half Marks
    )
}

/// True for characters that belong to a word: letters, digits and combining marks.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

/// English stop words dropped from queries (docs/design.md#r3-literal-queries). Matching is on
/// lowercased words, after the same separator rules as the index tokenizer (so "don't" is "don" and
/// "t").
#[rustfmt::skip]
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "couldn", "d", "did", "didn", "do", "does", "doesn",
    "doing", "don", "down", "during", "each", "either", "else", "ever", "few", "for", "from",
    "further", "get", "got", "had", "hadn", "has", "hasn", "have", "haven", "having", "he",
    "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into",
    "is", "isn", "it", "its", "itself", "just", "kind", "ll", "m", "me", "might", "more",
    "most", "much", "must", "my", "myself", "no", "nor", "not", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "re", "really",
    "s", "same", "shall", "she", "should", "shouldn", "so", "some", "such", "t", "than", "that",
    "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "us", "ve", "very", "was", "wasn",
    "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "whose",
    "why", "will", "with", "won", "would", "wouldn", "y", "yes", "you", "your", "yours",
    "yourself", "yourselves",
];

/// True when `word` (lowercase) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The words of `text` as the index tokenizer sees them: maximal runs of letters, digits and
/// combining marks outside unspaced scripts, lowercased. A run of marks alone is no word.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !is_word_char(c) || is_unspaced_script(c))
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(str::to_lowercase)
}

/// A query reduced to literal terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Terms {
    /// Distinct content words, in first-seen order (stop words removed unless nothing else
    /// was left).
    pub words: Vec<String>,
    /// Gram phrases of unspaced-script runs (each a sequence of consecutive grams).
    pub cjk: Vec<Vec<String>>,
    /// Every distinct word of the query, stop words included (for matching speaker labels).
    pub mentioned: Vec<String>,
    /// The question asks what the one it addresses said or did ("what did you suggest",
    /// "how did you recommend", "your advice"): see [`asks_addressee`].
    pub addressee: bool,
}

/// Most distinct words a query keeps (a 16 KB paste must not become a 3,000-term query).
/// Words after the first 64 distinct content words are ignored.
pub const MAX_QUERY_WORDS: usize = 64;
/// Most distinct words, stop words included, a query keeps for matching speaker labels.
pub const MAX_MENTIONED_WORDS: usize = 4 * MAX_QUERY_WORDS;
/// Most unspaced-script phrases a query keeps.
pub const MAX_QUERY_PHRASES: usize = 16;
/// Most characters of one unspaced-script run a query keeps (a pasted paragraph of Chinese is
/// one run: its first 32 characters make a 31-gram phrase).
pub const MAX_QUERY_RUN_CHARS: usize = 32;
/// Most grams, over all phrases, a query keeps. Each gram is a term of the FTS5 expression,
/// so this and [`MAX_QUERY_WORDS`] bound the work of one search.
pub const MAX_QUERY_GRAMS: usize = 128;
/// Longest word kept in a query, in bytes (longer ones are noise such as base64).
const MAX_WORD_BYTES: usize = 64;

impl Terms {
    /// Parses a free-text query into literal terms. Never fails: anything that is not a letter
    /// or digit separates words, so operators, quotes and SQL carry no meaning. The terms are
    /// bounded ([`MAX_QUERY_WORDS`], [`MAX_QUERY_PHRASES`], [`MAX_QUERY_RUN_CHARS`],
    /// [`MAX_QUERY_GRAMS`]) and parsing is linear in the query's length.
    pub fn parse(query: &str) -> Terms {
        Self::parse_with(query, true)
    }

    /// [`Terms::parse`] without dropping stop words (for evaluation).
    pub fn parse_keeping_stop_words(query: &str) -> Terms {
        Self::parse_with(query, false)
    }

    fn parse_with(query: &str, drop_stop_words: bool) -> Terms {
        let (mentioned, content) = Self::distinct_words(query, drop_stop_words);
        let mut words = if content.is_empty() {
            mentioned.clone()
        } else {
            content
        };
        words.truncate(MAX_QUERY_WORDS);
        Terms {
            words,
            cjk: Self::phrases(query),
            mentioned,
            addressee: asks_addressee(query),
        }
    }

    /// The first [`MAX_MENTIONED_WORDS`] distinct words, and the first [`MAX_QUERY_WORDS`]
    /// distinct content words (all words when stop words are kept).
    fn distinct_words(query: &str, drop_stop_words: bool) -> (Vec<String>, Vec<String>) {
        let mut seen = std::collections::HashSet::new();
        let (mut all, mut content) = (Vec::new(), Vec::new());
        for w in words(query) {
            if all.len() >= MAX_MENTIONED_WORDS && content.len() >= MAX_QUERY_WORDS {
                break;
            }
            if w.len() > MAX_WORD_BYTES || !seen.insert(w.clone()) {
                continue;
            }
            let is_content = !drop_stop_words || !is_stop_word(&w);
            if is_content && content.len() < MAX_QUERY_WORDS {
                content.push(w.clone());
            }
            if all.len() < MAX_MENTIONED_WORDS {
                all.push(w);
            }
        }
        (all, content)
    }

    /// The distinct gram phrases of the query's unspaced-script runs, within the bounds.
    fn phrases(query: &str) -> Vec<Vec<String>> {
        let mut cjk: Vec<Vec<String>> = Vec::new();
        let mut grams = 0;
        for mut run in unspaced_runs(query) {
            run.truncate(MAX_QUERY_RUN_CHARS);
            let phrase = run_grams(&run);
            if grams + phrase.len() > MAX_QUERY_GRAMS || cjk.len() == MAX_QUERY_PHRASES {
                break;
            }
            if !cjk.contains(&phrase) {
                grams += phrase.len();
                cjk.push(phrase);
            }
        }
        cjk
    }

    /// True when nothing searchable is left.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.cjk.is_empty()
    }
}

/// Words that make a question first person: the one asking speaks of themself.
pub const FIRST_PERSON: [&str; 5] = ["i", "my", "me", "mine", "myself"];

/// Words before "you" that make it the subject of a past act ("did you", "have you").
const PAST_AUXILIARIES: [&str; 7] = ["did", "didn", "had", "have", "haven", "was", "were"];

/// Past forms that do not end in "-ed" ("you said", "you told me").
#[rustfmt::skip]
const IRREGULAR_PAST: [&str; 20] = [
    "brought", "came", "chose", "found", "gave", "kept", "led", "made", "meant", "put", "said",
    "sent", "set", "showed", "shown", "taught", "thought", "told", "went", "wrote",
];

/// True when a question asks about what the one it addresses said or did: its first personal
/// pronoun (of the first or second person) is "your", or "you" as the subject of a past act
/// ("did you", "have you", "you suggested", "you said"). "You" in a request ("can you show
/// me", "could you explain") is no such reference and is skipped; a first-person pronoun
/// met first ("what did I tell you") makes the question the asker's own. Reads at most the
/// query's first [`MAX_MENTIONED_WORDS`] words.
pub fn asks_addressee(query: &str) -> bool {
    let ws: Vec<String> = words(query).take(MAX_MENTIONED_WORDS).collect();
    for (i, w) in ws.iter().enumerate() {
        match w.as_str() {
            w if FIRST_PERSON.contains(&w) => return false,
            "your" | "yours" => return true,
            "you" => {
                let before = i.checked_sub(1).map(|j| ws[j].as_str());
                let after = ws.get(i + 1).map(String::as_str);
                let past_aux = before.is_some_and(|b| PAST_AUXILIARIES.contains(&b));
                let past_verb = after.is_some_and(|a| {
                    (a.len() > 3 && a.ends_with("ed")) || IRREGULAR_PAST.contains(&a)
                });
                if past_aux || past_verb {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// Quotes one literal term for FTS5: wrapped in double quotes, inner quotes doubled. Inside a
/// quoted string FTS5 recognises no operator, column filter or prefix syntax.
pub fn quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The speaker label a text opens with, lowercased: `"Caroline: I went…"` → `"caroline"`.
/// A label is 1–4 words (letters, digits, spaces, `.`, `-`, `_`, `'`; starting with a
/// letter; at most 40 characters) followed by `": "`. Ranking treats it as the page's author.
pub fn author_label(text: &str) -> Option<String> {
    let (label, rest) = text.split_once(':')?;
    let ok_chars = label
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '-' | '_' | '\''));
    let starts_with_letter = label.chars().next().is_some_and(char::is_alphabetic);
    let spaced = rest.is_empty() || rest.starts_with(char::is_whitespace);
    if label.chars().count() > 40 || !ok_chars || !starts_with_letter || !spaced {
        return None;
    }
    let ws: Vec<String> = words(label).collect();
    (1..=4).contains(&ws.len()).then(|| ws.join(" "))
}

/// Phrases that mark a text as updating or replacing something said before.
const UPDATE_CUES: &[&[&str]] = &[
    &["changed", "to"],
    &["change", "to"],
    &["now"],
    &["instead"],
    &["replaces"],
    &["replaced"],
    &["replace"],
    &["updated"],
    &["update"],
    &["no", "longer"],
    &["switched"],
    &["moved", "to"],
    &["supersedes"],
    &["superseded"],
    &["correction"],
    &["renamed"],
    &["moved"],
    &["retired"],
    &["deprecated"],
    &["going", "forward"],
    &["revised"],
    &["rather", "than"],
    &["corrected"],
    &["anymore"],
    &["from", "now", "on"],
];

/// True when `text` contains update language ("changed to", "now", "instead", "replaces",
/// "no longer", …): evidence that it revises an earlier statement on the same subject.
pub fn has_update_cue(text: &str) -> bool {
    let ws: Vec<String> = words(text).take(4096).collect();
    UPDATE_CUES.iter().any(|cue| {
        ws.windows(cue.len())
            .any(|w| w.iter().zip(cue.iter()).all(|(a, b)| a == b))
    })
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const DAY_MS: i64 = 86_400_000;

/// The calendar date of `ts_ms` (UTC) in words, e.g. `"Monday 8 May 2023"`: indexed as
/// metadata so a query naming a day, month or year finds what was said then.
pub fn date_words(ts_ms: i64) -> String {
    day_words(ts_ms.div_euclid(DAY_MS))
}

/// [`date_words`] of a day count since 1970-01-01.
fn day_words(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    let weekday = WEEKDAYS[weekday(days)];
    format!("{weekday} {day} {} {year}", MONTHS[(month - 1) as usize])
}

/// 0 = Sunday … 6 = Saturday.
fn weekday(days: i64) -> usize {
    (days + 4).rem_euclid(7) as usize
}

/// The month `delta` months from `days`'s month, in words: `"March 2023"`.
fn month_words(days: i64, delta: i64) -> String {
    let (year, month, _) = civil_from_days(days);
    let n = year * 12 + i64::from(month) - 1 + delta;
    format!("{} {}", MONTHS[n.rem_euclid(12) as usize], n.div_euclid(12))
}

/// Most relative times one text resolves (each adds a few words to the page's metadata).
const MAX_RELATIVE_DATES: usize = 8;

/// The dates a text's relative times name, resolved against the time it was said (`ts_ms`,
/// UTC), in the words of [`date_words`]: "yesterday" and "last night" → the day before;
/// "tomorrow" → the day after; "last Tuesday" / "next Tuesday" → that weekday within the week
/// before / after; "last weekend" → the Saturday before; "last week" / "next week" → the day a
/// week before / after; "last month" / "next month" → that month (`"March 2023"`), "last year"
/// / "next year" → that year; "three days ago", "2 weeks ago", "a month ago", "a couple of
/// years ago" → that day, month or year. At most [`MAX_RELATIVE_DATES`] distinct dates, from
/// the first 4,096 words; a text naming none gives an empty string. Indexed beside the event's
/// own date, so "what did she do in March 2023" finds "we went last month" said in April.
pub fn relative_dates(text: &str, ts_ms: i64) -> String {
    let today = ts_ms.div_euclid(DAY_MS);
    let ws: Vec<String> = words(text).take(4096).collect();
    let mut out: Vec<String> = Vec::new();
    for i in 0..ws.len() {
        if out.len() == MAX_RELATIVE_DATES {
            break;
        }
        let w = |k: usize| ws.get(i + k).map_or("", String::as_str);
        let resolved = match (w(0), w(1)) {
            ("yesterday", _) | ("last", "night") => Some(day_words(today - 1)),
            ("tomorrow", _) => Some(day_words(today + 1)),
            (dir @ ("last" | "next"), unit) => relative_unit(today, dir == "last", unit),
            _ => ago(today, &ws[i..]),
        };
        if let Some(d) = resolved.filter(|d| !out.contains(d)) {
            out.push(d);
        }
    }
    out.join(" ")
}

/// "last UNIT" (`back`) or "next UNIT" from the day `today`.
fn relative_unit(today: i64, back: bool, unit: &str) -> Option<String> {
    let sign = if back { -1 } else { 1 };
    if let Some(wd) = WEEKDAYS.iter().position(|d| d.eq_ignore_ascii_case(unit)) {
        let now = weekday(today) as i64;
        let gap = if back {
            (now - wd as i64 - 1).rem_euclid(7) + 1
        } else {
            (wd as i64 - now - 1).rem_euclid(7) + 1
        };
        return Some(day_words(today + sign * gap));
    }
    match unit {
        "weekend" if back => Some(day_words(
            today - ((weekday(today) as i64).rem_euclid(7) + 1),
        )),
        "week" => Some(day_words(today + sign * 7)),
        "month" => Some(month_words(today, sign)),
        "year" => Some((civil_from_days(today).0 + sign).to_string()),
        _ => None,
    }
}

/// "N UNIT ago" at the start of `ws` ("three days ago", "a couple of weeks ago", "2 years ago").
fn ago(today: i64, ws: &[String]) -> Option<String> {
    let (n, rest) = match ws.first()?.as_str() {
        "a" | "an" | "one" => (1, &ws[1..]),
        "couple" => (2, ws.get(2..)?),
        w => (count_word(w)?, &ws[1..]),
    };
    let (rest, n) = match (rest.first().map(String::as_str), n) {
        (Some("couple"), 1) => (rest.get(2..)?, 2),
        _ => (rest, n),
    };
    if rest.get(1).map(String::as_str) != Some("ago") {
        return None;
    }
    match rest.first()?.trim_end_matches('s') {
        "day" => Some(day_words(today - n)),
        "week" => Some(day_words(today - 7 * n)),
        "month" => Some(month_words(today, -n)),
        "year" => Some((civil_from_days(today).0 - n).to_string()),
        _ => None,
    }
}

/// A small count in digits or words ("3", "three"), 1–12.
fn count_word(w: &str) -> Option<i64> {
    const NUMBERS: [&str; 12] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    let n = match w.parse::<i64>() {
        Ok(n) => n,
        Err(_) => NUMBERS.iter().position(|x| *x == w)? as i64 + 1,
    };
    (1..=12).contains(&n).then_some(n)
}

/// Year, month (1–12) and day (1–31) of a day count since 1970-01-01 (proleptic Gregorian;
/// H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The FTS5 expression for `terms`: its [`match_phrases`] OR-ed.
pub fn match_expression(terms: &Terms) -> String {
    match_phrases(terms).join(" OR ")
}

/// The phrases of [`match_expression`]: every word and CJK gram quoted; each multi-gram CJK
/// run also as a quoted phrase (so exact runs score higher); a one-character CJK run as a
/// quoted prefix. Only quoted strings and that `*` appear: no user text is syntax. Each is
/// an FTS5 expression on its own (a search counts each one's matches to bound its cost).
pub fn match_phrases(terms: &Terms) -> Vec<String> {
    let mut parts: Vec<String> = terms.words.iter().map(|w| quote(w)).collect();
    let mut grams = HashSet::new();
    for run in &terms.cjk {
        if run.len() > 1 {
            parts.push(quote(&run.join(" ")));
        }
        for g in run {
            if grams.insert(g.as_str()) {
                // A lone character also matches the bigrams it starts (a prefix query on a
                // term this function quoted itself).
                let prefix = if run.len() == 1 { "*" } else { "" };
                parts.push(format!("{}{prefix}", quote(g)));
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_render_in_words() {
        assert_eq!(date_words(0), "Thursday 1 January 1970");
        assert_eq!(date_words(1_683_554_160_000), "Monday 8 May 2023");
        assert_eq!(date_words(951_782_400_000), "Tuesday 29 February 2000");
        assert_eq!(date_words(-86_400_000), "Wednesday 31 December 1969");
    }

    #[test]
    fn relative_times_resolve_against_when_they_were_said() {
        // Tuesday 18 April 2023.
        let said = 1_681_819_200_000;
        assert_eq!(date_words(said), "Tuesday 18 April 2023");
        let r = |t: &str| relative_dates(t, said);
        assert_eq!(r("We went to a convention last month."), "March 2023");
        assert_eq!(r("Yesterday I ran"), "Monday 17 April 2023");
        assert_eq!(r("last night we ate"), "Monday 17 April 2023");
        assert_eq!(r("last Tuesday"), "Tuesday 11 April 2023");
        assert_eq!(r("last Monday"), "Monday 17 April 2023");
        assert_eq!(r("next Monday"), "Monday 24 April 2023");
        assert_eq!(r("last weekend"), "Saturday 15 April 2023");
        assert_eq!(r("last week"), "Tuesday 11 April 2023");
        assert_eq!(r("three days ago"), "Saturday 15 April 2023");
        assert_eq!(r("2 weeks ago"), "Tuesday 4 April 2023");
        assert_eq!(r("a couple of years ago"), "2021");
        assert_eq!(r("five months ago"), "November 2022");
        assert_eq!(r("last year and last year"), "2022");
        assert_eq!(r("the last one, a while ago, at last"), "");
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn pages_overlap_by_128_and_cover_everything() {
        let text: String = (0..5000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let p = pages(&text);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].char_start, p[0].char_end), (0, 2048));
        assert_eq!((p[1].char_start, p[1].char_end), (1920, 3968));
        assert_eq!((p[2].char_start, p[2].char_end), (3840, 5000));
        assert_eq!(&p[0].text[1920..], &p[1].text[..128]);
    }

    #[test]
    fn streamed_pages_match_a_char_vector_reference() {
        let alphabet: Vec<char> = "é项🚀a\u{301}".chars().collect();
        for n in [
            0, 1, 1919, 1920, 1921, 2047, 2048, 2049, 3967, 3968, 3969, 5888, 5889,
        ] {
            let text: String = (0..n).map(|i| alphabet[i % alphabet.len()]).collect();
            let chars: Vec<char> = text.chars().collect();
            let got = pages(&text);
            let mut start = 0;
            for (p, page) in got.iter().enumerate() {
                let end = (start + PAGE_CHARS).min(n);
                assert_eq!((page.page, page.char_start, page.char_end), (p, start, end));
                assert_eq!(page.text, chars[start..end].iter().collect::<String>());
                start += PAGE_STRIDE;
            }
            assert_eq!(got.last().map(|p| p.char_end), Some(n));
            assert!(got.len() == 1 || got[got.len() - 2].char_end < n);
        }
    }

    #[test]
    fn short_and_empty_texts_are_one_page() {
        assert_eq!(pages("").len(), 1);
        assert_eq!(pages(&"é".repeat(2048)).len(), 1);
        let long = "é".repeat(2049);
        let p = pages(&long);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].char_start, 1920);
        assert_eq!(p[1].text.chars().count(), 129);
    }

    #[test]
    fn queries_become_words_without_syntax() {
        let t = Terms::parse(r#"the "NEAR(foo* bar)" -baz col:qux AND 项目代码"#);
        assert_eq!(t.words, ["near", "foo", "bar", "baz", "col", "qux"]);
        assert_eq!(t.cjk, vec![vec!["项目", "目代", "代码"]]);
        assert_eq!(Terms::parse("the of").words, ["the", "of"]);
        assert!(Terms::parse("  ;'()  ").is_empty());
    }

    #[test]
    fn questions_about_what_the_addressee_said_are_recognised() {
        for q in [
            "How did you recommend managing the flow of requests when my app retries?",
            "What did you suggest for the cache?",
            "You mentioned a library for dates: which one?",
            "What was your advice on indexes?",
            "Which tool have you recommended?",
        ] {
            assert!(asks_addressee(q), "{q}");
        }
        for q in [
            "When does my first sprint end?",
            "Can you show me how to implement a login feature?",
            "What did I tell you about the deadline?",
            "Could you explain what I decided about the schema?",
            "What did Caroline research?",
            "you",
        ] {
            assert!(!asks_addressee(q), "{q}");
        }
    }

    #[test]
    fn speaker_labels_are_found() {
        assert_eq!(author_label("Caroline: I went"), Some("caroline".into()));
        assert_eq!(
            author_label("Dr. Ada Lovelace: hi"),
            Some("dr ada lovelace".into())
        );
        assert_eq!(author_label("12:30 is lunch"), None);
        assert_eq!(author_label("see https://example.org"), None);
        assert_eq!(author_label("no label here"), None);
        assert_eq!(author_label("one two three four five: x"), None);
    }

    #[test]
    fn update_language_is_detected() {
        assert!(has_update_cue("The port was changed to 5433."));
        assert!(has_update_cue("We now deploy on Fridays"));
        assert!(!has_update_cue("The port is 5432."));
    }

    #[test]
    fn cjk_text_becomes_bigrams() {
        assert_eq!(cjk_grams("项目代码 is X, 好"), "项目 目代 代码 码 好");
        assert_eq!(cjk_grams("plain"), "");
    }

    #[test]
    fn words_glued_to_cjk_are_indexed_alone() {
        assert_eq!(cjk_grams("用Python编程"), "用 编程 程 python");
        assert_eq!(cjk_grams("东京tower"), "东京 京 tower");
        assert_eq!(cjk_grams("东京 tower"), "东京 京");
    }

    #[test]
    fn decomposed_accents_stay_inside_their_word() {
        let w: Vec<String> = words("e\u{301}lan \u{301} caf\u{e9}").collect();
        assert_eq!(w, ["e\u{301}lan", "caf\u{e9}"]);
    }

    #[test]
    fn huge_queries_are_bounded() {
        let many: String = (0..10_000).map(|i| format!("w{i} the ")).collect();
        let t = Terms::parse(&many);
        assert_eq!(t.words.len(), MAX_QUERY_WORDS);
        assert_eq!(t.words[0], "w0");
        assert!(t.mentioned.len() <= MAX_MENTIONED_WORDS);
        let han: String = (0..5000u32)
            .map(|i| char::from_u32(0x4E00 + (i * 7919) % 20_000).unwrap())
            .collect();
        let t = Terms::parse(&han);
        assert_eq!(
            t.cjk,
            vec![run_grams(
                &han.chars().take(MAX_QUERY_RUN_CHARS).collect::<Vec<_>>()
            )]
        );
        let runs: String = (0..5000u32)
            .map(|i| {
                format!(
                    "{}{} x ",
                    char::from_u32(0x4E00 + i).unwrap(),
                    char::from_u32(0x5E00 + i).unwrap()
                )
            })
            .collect();
        let t = Terms::parse(&runs);
        assert_eq!(t.cjk.len(), MAX_QUERY_PHRASES);
        assert!(t.cjk.iter().map(Vec::len).sum::<usize>() <= MAX_QUERY_GRAMS);
    }
}
