//! Images: what an image's bytes say about themselves (type and size, from the header), the
//! model table, and each provider's published rule for an image's tokens
//! (docs/design.md#p14-more-wire-formats; sources in `docs/projection.md`, "Images").
//!
//! # The model table
//!
//! [`MODELS`] gives, per model family (matched by the longest name prefix), its context
//! window, its default output reservation, its image token rule and the prompt-cache hints it
//! takes ([`CacheHints`]). A model in no row takes its format's default rule
//! ([`default_rule`]: OpenAI's `gpt-4o` tiles, Anthropic's pixel area) and its format's
//! default hints ([`default_hints`]), and the report says so.
//!
//! # The rules
//!
//! * **OpenAI tiles** (`gpt-4o`, `gpt-4.1`, `gpt-5`, `o1`, `o3`, …): at `detail` `low`, the
//!   base tokens alone. Otherwise the image is scaled to fit within 2048 × 2048, then (if its
//!   shortest side is longer) so that its shortest side is 768; each 512-pixel tile it then
//!   covers costs the tile tokens, plus the base once. `auto` is charged as `high`, the most
//!   the model may choose.
//! * **OpenAI patches** (`gpt-4.1-mini`, `gpt-4.1-nano`, `o4-mini`, `gpt-5-mini`,
//!   `gpt-5-nano`): the 32-pixel patches the image covers, at most 1536 (a larger image is
//!   scaled down until it fits, keeping whole patches across its width), times the family's
//!   multiplier.
//! * **Anthropic area**: an image whose long edge is over 1568 pixels, or whose area is over
//!   1,200,000 pixels (1600 tokens), is scaled down to fit both; then `width × height / 750`
//!   tokens, rounded up.
//!
//! An image ctxlog cannot read (a URL, bytes whose header it does not know) is charged the
//! most its rule allows, and the figure is flagged as an estimate.

pub use ctxlog_event::media::{Detail, ImageType, dimensions};

/// A provider's rule for an image's tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageRule {
    /// OpenAI's 512-pixel tiles: `base + tile × tiles` (`base` alone at detail low).
    Tiles {
        /// Tokens every image costs.
        base: u64,
        /// Tokens per tile.
        tile: u64,
    },
    /// OpenAI's 32-pixel patches (at most 1536) times a multiplier, in thousandths.
    Patches {
        /// The multiplier × 1000 (1.62 is 1620).
        multiplier_milli: u64,
    },
    /// Anthropic's `width × height / 750` after its resizing.
    Area,
}

/// One row of the model table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelFamily {
    /// Model names starting with this belong to the family (the longest prefix wins).
    pub prefix: &'static str,
    /// The context window, in tokens.
    pub context_window: u64,
    /// The default output reservation, in tokens: the most the model writes in one reply.
    pub default_output: u64,
    /// The image token rule.
    pub image: ImageRule,
    /// The prompt-cache hints the family takes (docs/projection.md, "Cache hints").
    pub cache: CacheHints,
}

/// Which prompt-cache hints a model takes (docs/projection.md, "Cache hints").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheHints {
    /// Anthropic's `cache_control` breakpoints (at most 4 per request): on the system prompt
    /// (or the last tool definition) and at the end of the stable prefix.
    CacheControl,
    /// OpenAI's automatic prefix caching, steered by `prompt_cache_key`.
    PromptCacheKey,
    /// `prompt_cache_key`, and OpenAI's explicit `prompt_cache_breakpoint` on content parts
    /// (at most 4 written per request) at the same places as Anthropic's breakpoints.
    PromptCacheBreakpoints,
}

impl CacheHints {
    /// Whether a body of `format` can carry these hints.
    pub fn fits_format(self, format: crate::WireFormat) -> bool {
        (self == CacheHints::CacheControl) == (format == crate::WireFormat::AnthropicMessages)
    }

    /// The hints' name, as the report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheHints::CacheControl => "cache_control",
            CacheHints::PromptCacheKey => "prompt_cache_key",
            CacheHints::PromptCacheBreakpoints => "prompt_cache_breakpoints",
        }
    }

    /// Whether these hints include explicit breakpoints in the messages.
    pub fn breakpoints(self) -> bool {
        self != CacheHints::PromptCacheKey
    }
}

const fn row(
    prefix: &'static str,
    window: u64,
    output: u64,
    image: ImageRule,
    cache: CacheHints,
) -> ModelFamily {
    ModelFamily {
        prefix,
        context_window: window,
        default_output: output,
        image,
        cache,
    }
}

const KEY: CacheHints = CacheHints::PromptCacheKey;
const KEY_AND_BREAKPOINTS: CacheHints = CacheHints::PromptCacheBreakpoints;
const CACHE_CONTROL: CacheHints = CacheHints::CacheControl;

const fn tiles(base: u64, tile: u64) -> ImageRule {
    ImageRule::Tiles { base, tile }
}

const fn patches(multiplier_milli: u64) -> ImageRule {
    ImageRule::Patches { multiplier_milli }
}

/// The model table: sources in `docs/projection.md` ("Images"), one per row.
pub const MODELS: &[ModelFamily] = &[
    row("gpt-4o", 128_000, 16_384, tiles(85, 170), KEY),
    row("gpt-4o-mini", 128_000, 16_384, tiles(2833, 5667), KEY),
    row("gpt-4.1", 1_047_576, 32_768, tiles(85, 170), KEY),
    row("gpt-4.1-mini", 1_047_576, 32_768, patches(1620), KEY),
    row("gpt-4.1-nano", 1_047_576, 32_768, patches(2460), KEY),
    row("gpt-4.5", 128_000, 16_384, tiles(85, 170), KEY),
    row("gpt-5", 400_000, 128_000, tiles(70, 140), KEY),
    row("gpt-5-mini", 400_000, 128_000, patches(1620), KEY),
    row("gpt-5-nano", 400_000, 128_000, patches(2460), KEY),
    // The published schema gives `prompt_cache_breakpoint` to `gpt-5.6` and later; the other
    // figures are the `gpt-5` row's, which the family took before it had a row of its own.
    row(
        "gpt-5.6",
        400_000,
        128_000,
        tiles(70, 140),
        KEY_AND_BREAKPOINTS,
    ),
    row("o1", 200_000, 100_000, tiles(75, 150), KEY),
    row("o3", 200_000, 100_000, tiles(75, 150), KEY),
    row("o4-mini", 200_000, 100_000, patches(1720), KEY),
    row("computer-use-preview", 8_192, 1_024, tiles(65, 129), KEY),
    row(
        "claude-opus-4",
        200_000,
        32_000,
        ImageRule::Area,
        CACHE_CONTROL,
    ),
    row(
        "claude-sonnet-4",
        200_000,
        64_000,
        ImageRule::Area,
        CACHE_CONTROL,
    ),
    row(
        "claude-3-7-sonnet",
        200_000,
        64_000,
        ImageRule::Area,
        CACHE_CONTROL,
    ),
    row(
        "claude-3-5-haiku",
        200_000,
        8_192,
        ImageRule::Area,
        CACHE_CONTROL,
    ),
    row(
        "claude-haiku-4",
        200_000,
        64_000,
        ImageRule::Area,
        CACHE_CONTROL,
    ),
];

/// The family of `model`: the row with the longest prefix of it.
pub fn family(model: &str) -> Option<&'static ModelFamily> {
    MODELS
        .iter()
        .filter(|f| model.starts_with(f.prefix))
        .max_by_key(|f| f.prefix.len())
}

/// The rule a format uses for a model in no row: `gpt-4o`'s tiles for the OpenAI formats,
/// the pixel area for Anthropic.
pub fn default_rule(format: crate::WireFormat) -> ImageRule {
    match format {
        crate::WireFormat::AnthropicMessages => ImageRule::Area,
        _ => tiles(85, 170),
    }
}

/// The hints a format takes for a model in no row (or in a row whose hints the format cannot
/// carry): `cache_control` for Anthropic, `prompt_cache_key` for the OpenAI formats.
pub fn default_hints(format: crate::WireFormat) -> CacheHints {
    match format {
        crate::WireFormat::AnthropicMessages => CacheHints::CacheControl,
        _ => CacheHints::PromptCacheKey,
    }
}

/// The cache hints for `model` in `format`, and where they came from, in words: the model's
/// row of the model table, or the format's default (no row, or a row whose hints the format
/// cannot carry).
pub fn hints_for(format: crate::WireFormat, model: &str) -> (CacheHints, String) {
    let default = default_hints(format);
    match family(model) {
        Some(f) if f.cache.fits_format(format) => {
            (f.cache, format!("model table row {:?}", f.prefix))
        }
        Some(f) => (
            default,
            format!(
                "model table row {:?} takes {}, which {} cannot carry: the format's default",
                f.prefix,
                f.cache.as_str(),
                format.as_str()
            ),
        ),
        None => (
            default,
            format!(
                "no row for model {model:?}: the {} default",
                format.as_str()
            ),
        ),
    }
}

/// What the report says of the cache hints in `body` (a body of `request`'s format), `None`
/// without `cache_hints`.
pub(crate) fn hints_report(
    body: &[u8],
    request: &crate::ProjectionRequest,
) -> Option<crate::CacheHintsReport> {
    if !request.cache_hints() {
        return None;
    }
    let (kind, source) = hints_for(request.format, &request.model);
    // A field name with its quotes cannot occur inside a JSON string (its quotes would be
    // escaped there), so each occurrence is a field.
    let marks: [&[u8]; 2] = [b"\"cache_control\":", b"\"prompt_cache_breakpoint\":"];
    let breakpoints = marks
        .iter()
        .map(|m| body.windows(m.len()).filter(|w| w == m).count() as u64)
        .sum();
    Some(crate::CacheHintsReport {
        kind,
        breakpoints,
        source,
    })
}

/// The rule for `model` in `format`, and whether it came from the table.
pub fn rule_for(format: crate::WireFormat, model: &str) -> (ImageRule, bool) {
    match family(model) {
        Some(f) => (f.image, true),
        None => (default_rule(format), false),
    }
}

impl ImageRule {
    /// The rule in words, with its constants.
    pub fn describe(self) -> String {
        match self {
            ImageRule::Tiles { base, tile } => {
                format!("OpenAI 512-pixel tiles: {base} + {tile} per tile ({base} at detail low)")
            }
            ImageRule::Patches { multiplier_milli } => format!(
                "OpenAI 32-pixel patches (at most 1536) × {}.{:03}",
                multiplier_milli / 1000,
                multiplier_milli % 1000
            ),
            ImageRule::Area => {
                "Anthropic pixel area: width × height / 750 after resizing".to_owned()
            }
        }
    }
}

/// What the report says of the media in `body` (a body of `request`'s format), `None` when
/// it has none: how many images and documents, how many figures are estimates, and which
/// image rule counted them.
pub(crate) fn report(
    body: &[u8],
    request: &crate::ProjectionRequest,
) -> Option<crate::MediaReport> {
    const MARKS: [&[u8]; 6] = [
        b"\"image_url\"",
        b"\"input_image\"",
        b"\"type\":\"image\"",
        b"\"type\":\"file\"",
        b"\"input_file\"",
        b"\"type\":\"document\"",
    ];
    if !MARKS.iter().any(|m| body.windows(m.len()).any(|w| w == *m)) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let counts = crate::tokens::media_counts(request.format, value.as_object()?);
    if counts.images == 0 && counts.documents == 0 {
        return None;
    }
    let (rule, from_table) = rule_for(request.format, &request.model);
    let source = match family(&request.model) {
        Some(f) if from_table => format!("model table row {:?}", f.prefix),
        _ => format!(
            "no row for model {:?}: the {} default",
            request.model,
            request.format.as_str()
        ),
    };
    Some(crate::MediaReport {
        images: counts.images,
        images_estimated: counts.images_estimated,
        documents: counts.documents,
        rule: format!("{} ({source})", rule.describe()),
    })
}

/// An image's tokens by `rule` at `detail`, and whether the figure is an estimate (the size
/// was unknown: the most the rule allows).
pub fn image_tokens(rule: ImageRule, detail: Detail, size: Option<(u32, u32)>) -> (u64, bool) {
    let estimate = size.is_none();
    let tokens = match (rule, size) {
        (ImageRule::Tiles { base, .. }, _) if detail == Detail::Low => base,
        (ImageRule::Tiles { base, tile }, size) => {
            // The largest a high-detail image can be once scaled: 768 × 2048, 2 × 4 tiles.
            let (w, h) = size.map_or((768.0, 2048.0), |(w, h)| tile_scale(w, h));
            base + tile * (w / 512.0).ceil() as u64 * (h / 512.0).ceil() as u64
        }
        (ImageRule::Patches { multiplier_milli }, size) => {
            let patches = size.map_or(MAX_PATCHES, |(w, h)| patch_count(w, h));
            (patches * multiplier_milli).div_ceil(1000)
        }
        (ImageRule::Area, size) => {
            let (w, h) = size.map_or((1092, 1092), |(w, h)| area_scale(w, h));
            (w * h).div_ceil(750)
        }
    };
    (tokens, estimate)
}

/// OpenAI's high-detail scaling: within 2048 × 2048, then the shortest side at most 768.
fn tile_scale(w: u32, h: u32) -> (f64, f64) {
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    if w.max(h) > 2048.0 {
        let s = 2048.0 / w.max(h);
        (w, h) = (w * s, h * s);
    }
    if w.min(h) > 768.0 {
        let s = 768.0 / w.min(h);
        (w, h) = (w * s, h * s);
    }
    (w, h)
}

/// The most patches an image is sent as.
const MAX_PATCHES: u64 = 1536;

/// OpenAI's patch count: 32-pixel patches, scaled down to at most 1536.
fn patch_count(w: u32, h: u32) -> u64 {
    let (w, h) = (f64::from(w), f64::from(h));
    let raw = (w / 32.0).ceil() * (h / 32.0).ceil();
    if raw <= MAX_PATCHES as f64 {
        return raw as u64;
    }
    let mut s = (32.0 * 32.0 * MAX_PATCHES as f64 / (w * h)).sqrt();
    // Keep whole patches across the width (and the height): shrink a little more.
    let (pw, ph) = (w * s / 32.0, h * s / 32.0);
    s *= (pw.floor() / pw).min(ph.floor() / ph);
    // Less a hair: `s` was chosen to make one side a whole number of patches.
    let whole = |x: f64| (x / 32.0 - 1e-9).ceil();
    let patches = (whole(w * s) * whole(h * s)) as u64;
    patches.min(MAX_PATCHES)
}

/// Anthropic's resizing: long edge at most 1568, area at most 1,200,000 pixels.
fn area_scale(w: u32, h: u32) -> (u64, u64) {
    let (wf, hf) = (f64::from(w), f64::from(h));
    let s = 1f64
        .min(1568.0 / wf.max(hf))
        .min((1_200_000.0 / (wf * hf)).sqrt());
    if s >= 1.0 {
        return (u64::from(w), u64::from(h));
    }
    ((wf * s).floor() as u64, (hf * s).floor() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPT_4O: ImageRule = ImageRule::Tiles {
        base: 85,
        tile: 170,
    };

    #[test]
    fn openais_worked_examples() {
        // docs/projection.md, "Images": the published examples for gpt-4o.
        assert_eq!(
            image_tokens(GPT_4O, Detail::High, Some((1024, 1024))).0,
            765
        );
        assert_eq!(
            image_tokens(GPT_4O, Detail::High, Some((2048, 4096))).0,
            1105
        );
        assert_eq!(image_tokens(GPT_4O, Detail::Low, Some((4096, 8192))).0, 85);
        // Patches: 1024 × 1024 is 1024 patches; 1800 × 2400 becomes 1056 × 1408, 1452.
        assert_eq!(patch_count(1024, 1024), 1024);
        assert_eq!(patch_count(1800, 2400), 1452);
        assert_eq!(
            image_tokens(patches(1620), Detail::Auto, Some((1024, 1024))).0,
            1659
        );
    }

    #[test]
    fn anthropics_worked_examples() {
        // 1000 × 1000 ≈ 1334 tokens; 200 × 200 ≈ 54; the largest 1:1 image, 1092 × 1092,
        // ≈ 1590.
        assert_eq!(
            image_tokens(ImageRule::Area, Detail::Auto, Some((1000, 1000))).0,
            1334
        );
        assert_eq!(
            image_tokens(ImageRule::Area, Detail::Auto, Some((200, 200))).0,
            54
        );
        assert_eq!(
            image_tokens(ImageRule::Area, Detail::Auto, Some((1092, 1092))).0,
            1590
        );
        assert!(image_tokens(ImageRule::Area, Detail::Auto, Some((4000, 3000))).0 <= 1600);
    }

    #[test]
    fn an_unknown_size_is_charged_the_most_and_flagged() {
        assert_eq!(image_tokens(GPT_4O, Detail::High, None), (1445, true));
        assert_eq!(
            image_tokens(ImageRule::Area, Detail::Auto, None),
            (1590, true)
        );
    }

    #[test]
    fn headers_give_type_and_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&1024u32.to_be_bytes());
        png.extend_from_slice(&768u32.to_be_bytes());
        assert_eq!(dimensions(&png), Some((ImageType::Png, 1024, 768)));
        let gif = b"GIF89a\x00\x04\x00\x03";
        assert_eq!(dimensions(gif), Some((ImageType::Gif, 1024, 768)));
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x03,
            0x00, 0x04, 0x00,
        ];
        assert_eq!(dimensions(&jpeg), Some((ImageType::Jpeg, 1024, 768)));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend_from_slice(&[0xFF, 0x03, 0x00, 0xFF, 0x02, 0x00]);
        assert_eq!(dimensions(&webp), Some((ImageType::Webp, 1024, 768)));
        assert_eq!(dimensions(b"not an image"), None);
        assert_eq!(dimensions(&png[..20]), None);
    }

    #[test]
    fn the_longest_prefix_names_the_family() {
        assert_eq!(
            family("gpt-4o-mini-2024-07-18").unwrap().prefix,
            "gpt-4o-mini"
        );
        assert_eq!(family("gpt-4o").unwrap().prefix, "gpt-4o");
        assert_eq!(family("claude-sonnet-4-5").unwrap().image, ImageRule::Area);
        assert!(family("llama-3").is_none());
    }
}
