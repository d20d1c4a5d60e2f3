//! Media in events: the parts of a user message or tool result (text, images, documents),
//! what an image's bytes say about themselves (type and size, read from the header), and the
//! rules a part must meet to be stored (docs/ledger-format.md, "Media parts").
//!
//! A part as committed carries its bytes as base64 `data`; the ledger checks them
//! ([`Part::check`]), stores the decoded bytes once as a content-addressed artifact and keeps
//! only the reference (`artifact`) in the event. A part read back for a projection has its
//! `data` filled in again from the artifact by the store; nothing else ever holds the base64.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::ArtifactRef;

/// The most bytes one image may hold (decoded): Anthropic's per-image limit, the lowest of the
/// providers'.
pub const MAX_IMAGE_BYTES: usize = 5 << 20;
/// The most bytes one document may hold (decoded).
pub const MAX_DOCUMENT_BYTES: usize = 10 << 20;
/// The longest side an image may have, in pixels (Anthropic refuses larger images).
pub const MAX_IMAGE_SIDE: u32 = 8000;
/// The media types a document may have.
pub const DOCUMENT_TYPES: [&str; 1] = ["application/pdf"];

/// One part of a user message or tool result. Serialized with a `"type"` tag:
///
/// ```json
/// {"type":"text","text":"What is in this picture?"}
/// {"type":"image","url":"https://example.com/cat.png","detail":"low"}
/// {"type":"image","data":"iVBORw0KGgo…","media_type":"image/png"}
/// {"type":"document","data":"JVBERi0…","media_type":"application/pdf","name":"report.pdf"}
/// ```
///
/// Stored, an image or document given as `data` has `artifact` instead (and `data` again
/// when read back for a projection).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image: a URL, or bytes (base64 `data` with its `media_type`).
    Image {
        /// Where the provider fetches the image (an `https:` or `data:` URL); never fetched by
        /// ctxlog.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// The image's bytes, base64 (standard alphabet, padded): only in a commit as given
        /// and in a part read back for a projection, never in the log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`; required with `data`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        /// OpenAI's detail level; left out means the API's default (`auto`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<Detail>,
        /// The stored bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<ArtifactRef>,
    },
    /// A document (a PDF), as bytes.
    Document {
        /// The document's bytes, base64, as for an image.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// `application/pdf`.
        media_type: String,
        /// Its file name, if the application gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The stored bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<ArtifactRef>,
    },
}

impl Part {
    /// The artifact this part references, if any.
    pub fn artifact(&self) -> Option<&ArtifactRef> {
        match self {
            Part::Image { artifact, .. } | Part::Document { artifact, .. } => artifact.as_ref(),
            Part::Text { .. } => None,
        }
    }

    /// What a reader sees of the part as text: the text, `[image]` (with its URL), or
    /// `[document NAME]`; never base64.
    pub fn readable_text(&self) -> String {
        match self {
            Part::Text { text } => text.clone(),
            Part::Image { url: Some(url), .. } if !url.starts_with("data:") => {
                format!("[image {url}]")
            }
            Part::Image { .. } => "[image]".to_owned(),
            Part::Document { name: Some(n), .. } => format!("[document {n}]"),
            Part::Document { .. } => "[document]".to_owned(),
        }
    }

    /// Checks a part as committed and returns the bytes its `data` holds (to store as an
    /// artifact), `None` for a text part, a URL image or a part already referencing an
    /// artifact.
    ///
    /// # Errors
    /// A message naming what is wrong and what to send instead: base64 that does not decode,
    /// a media type not allowed or not what the bytes' header says, an image whose header
    /// gives no size or a side over [`MAX_IMAGE_SIDE`], bytes over [`MAX_IMAGE_BYTES`] or
    /// [`MAX_DOCUMENT_BYTES`], an image with neither or both of `url` and `data`.
    pub fn check(&self) -> Result<Option<Vec<u8>>, String> {
        match self {
            Part::Text { .. } => Ok(None),
            Part::Image {
                url,
                data,
                media_type,
                artifact,
                ..
            } => match (url, data, artifact) {
                (Some(url), None, None) => {
                    if url.trim().is_empty() {
                        return Err("an image part's \"url\" is empty: give the image's URL, or its bytes as base64 \"data\" with a \"media_type\"".to_owned());
                    }
                    if media_type.is_some() {
                        return Err("an image part with a \"url\" takes no \"media_type\" (the provider reads the type from what it fetches): leave it out".to_owned());
                    }
                    Ok(None)
                }
                (None, Some(data), None) => {
                    let Some(media_type) = media_type else {
                        return Err(format!(
                            "an image part with \"data\" needs its \"media_type\": one of {}",
                            image_types()
                        ));
                    };
                    let Some(declared) = ImageType::from_media_type(media_type) else {
                        return Err(format!(
                            "image media type {media_type:?} is not allowed: send one of {}",
                            image_types()
                        ));
                    };
                    let bytes = decode(data, "image", MAX_IMAGE_BYTES)?;
                    let Some(found) = ImageType::sniff(&bytes) else {
                        return Err(format!(
                            "the image's bytes are not a PNG, JPEG, GIF or WebP image (its header says none of them), though its media_type says {media_type}"
                        ));
                    };
                    if found != declared {
                        return Err(format!(
                            "the image's header says {}, its media_type says {media_type}: send the media type of the bytes",
                            found.media_type()
                        ));
                    }
                    let Some((_, w, h)) = dimensions(&bytes) else {
                        return Err(format!(
                            "the {} image's header gives no size (it is cut short or says 0 pixels): send the whole image",
                            found.media_type()
                        ));
                    };
                    if w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE {
                        return Err(format!(
                            "the image's header says {w} × {h} pixels, over the {MAX_IMAGE_SIDE}-pixel limit for a side: scale it down first"
                        ));
                    }
                    decodes_whole(found, &bytes, w, h)?;
                    Ok(Some(bytes))
                }
                (None, None, Some(_)) => Ok(None),
                (None, None, None) => Err(
                    "an image part needs a \"url\" or base64 \"data\" with a \"media_type\""
                        .to_owned(),
                ),
                _ => Err("an image part takes one of \"url\" and \"data\", not both".to_owned()),
            },
            Part::Document {
                data,
                media_type,
                artifact,
                ..
            } => {
                if !DOCUMENT_TYPES.contains(&media_type.as_str()) {
                    return Err(format!(
                        "document media type {media_type:?} is not allowed: send one of {}",
                        DOCUMENT_TYPES.join(", ")
                    ));
                }
                match (data, artifact) {
                    (Some(data), None) => {
                        let bytes = decode(data, "document", MAX_DOCUMENT_BYTES)?;
                        if !bytes.starts_with(b"%PDF-") {
                            return Err("the document's bytes are not a PDF (they do not start with %PDF-), though its media_type says application/pdf".to_owned());
                        }
                        Ok(Some(bytes))
                    }
                    (None, Some(_)) => Ok(None),
                    (None, None) => {
                        Err("a document part needs its bytes as base64 \"data\"".to_owned())
                    }
                    (Some(_), Some(_)) => Err(
                        "a document part takes \"data\" or an \"artifact\", not both".to_owned(),
                    ),
                }
            }
        }
    }

    /// The bytes a part's base64 `data` holds, without [`Part::check`]'s decode of the
    /// picture: what names the artifact the part is (or would be) stored as. `None` for a
    /// part without `data` or with `data` that is not base64.
    #[must_use]
    pub fn data_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Part::Image {
                data: Some(data), ..
            }
            | Part::Document {
                data: Some(data), ..
            } => base64::engine::general_purpose::STANDARD.decode(data).ok(),
            _ => None,
        }
    }

    /// The part as stored: `data` replaced by a reference to `stored` (the artifact that holds
    /// the bytes [`Part::check`] returned).
    #[must_use]
    pub fn stored_as(&self, stored: ArtifactRef) -> Part {
        let mut part = self.clone();
        match &mut part {
            Part::Image { data, artifact, .. } | Part::Document { data, artifact, .. } => {
                *data = None;
                *artifact = Some(stored);
            }
            Part::Text { .. } => {}
        }
        part
    }

    /// The part with its bytes as base64 `data` again in place of its artifact reference (for
    /// a projection or an export: the form a commit takes).
    #[must_use]
    pub fn with_data(&self, bytes: &[u8]) -> Part {
        let mut part = self.clone();
        if let Part::Image { data, artifact, .. } | Part::Document { data, artifact, .. } =
            &mut part
        {
            *data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            *artifact = None;
        }
        part
    }
}

/// Proves an image's bytes hold the picture its header claims. The header is what ctxlog
/// charges tokens by; a provider decodes the pixels, and refuses an image whose bytes run out
/// before the size its header gives (a photo cut short, or a header rewritten to a size the
/// data does not hold) — stored, such an image would fail every later call that sends it.
/// So the whole image is decoded once, strictly (a JPEG strictly enough that a scan ending
/// early is an error, not grey rows), and the decoded size compared with the header's.
/// Bytes after the picture are not an error: every decoder stops at the header's size, so
/// that size is what a provider sees and bills. Memory: one decoded frame, at most
/// [`MAX_IMAGE_SIDE`]² pixels.
fn decodes_whole(kind: ImageType, bytes: &[u8], w: u32, h: u32) -> Result<(), String> {
    let media = kind.media_type();
    let broken = |e: &dyn std::fmt::Display| {
        format!(
            "the {media} image's header says {w} × {h} pixels, but its bytes do not decode to them ({e}): send the whole image, as an image tool saves it"
        )
    };
    let decoded = match kind {
        ImageType::Jpeg => {
            let options = zune_core::options::DecoderOptions::default()
                .set_strict_mode(true)
                .set_max_width(MAX_IMAGE_SIDE as usize)
                .set_max_height(MAX_IMAGE_SIDE as usize);
            let cursor = zune_core::bytestream::ZCursor::new(bytes);
            let mut decoder = zune_jpeg::JpegDecoder::new_with_options(cursor, options);
            decoder.decode().map_err(|e| broken(&e))?;
            decoder
                .dimensions()
                .and_then(|(w, h)| Some((u32::try_from(w).ok()?, u32::try_from(h).ok()?)))
        }
        ImageType::Png | ImageType::Gif | ImageType::Webp => {
            let format = match kind {
                ImageType::Png => image::ImageFormat::Png,
                ImageType::Gif => image::ImageFormat::Gif,
                _ => image::ImageFormat::WebP,
            };
            let image = image::ImageReader::with_format(std::io::Cursor::new(bytes), format)
                .decode()
                .map_err(|e| broken(&e))?;
            Some((image.width(), image.height()))
        }
    };
    match decoded {
        Some(size) if size == (w, h) => Ok(()),
        Some((dw, dh)) => Err(broken(&format_args!("they decode to {dw} × {dh}"))),
        None => Err(broken(&"the decoder gives no size")),
    }
}

/// A `data:` URL's media type and base64, if `url` is one (`data:MEDIA_TYPE;base64,DATA`).
pub fn split_data_url(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")?.split_once(";base64,")
}

/// The bytes of an image's (`image` true) or document's base64 `data`, as [`Part::check`]
/// decodes them: strict base64, not empty, within [`MAX_IMAGE_BYTES`] or
/// [`MAX_DOCUMENT_BYTES`].
///
/// # Errors
/// What is wrong, and what to send instead.
pub fn decode_data(data: &str, image: bool) -> Result<Vec<u8>, String> {
    match image {
        true => decode(data, "image", MAX_IMAGE_BYTES),
        false => decode(data, "document", MAX_DOCUMENT_BYTES),
    }
}

fn image_types() -> String {
    ImageType::ALL.map(ImageType::media_type).join(", ")
}

/// Decodes base64 `data` of a part of `what`, refusing bytes over `max`.
fn decode(data: &str, what: &str, max: usize) -> Result<Vec<u8>, String> {
    // Over the cap before decoding: base64 is 4 characters per 3 bytes.
    if data.len() / 4 * 3 > max + 3 {
        return Err(format!(
            "the {what} is over the {max}-byte limit for one {what} ({} bytes of base64): send a smaller one",
            data.len()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| {
            format!("the {what}'s \"data\" is not base64 ({e}): send the bytes base64-encoded, standard alphabet, padded, no data: prefix")
        })?;
    if bytes.len() > max {
        return Err(format!(
            "the {what} is {} bytes, over the {max}-byte limit for one {what}: send a smaller one",
            bytes.len()
        ));
    }
    if bytes.is_empty() {
        return Err(format!("the {what}'s \"data\" is empty"));
    }
    Ok(bytes)
}

/// An image type ctxlog reads the size of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageType {
    /// `image/png`
    Png,
    /// `image/jpeg`
    Jpeg,
    /// `image/gif`
    Gif,
    /// `image/webp`
    Webp,
}

impl ImageType {
    /// Every type, in the order error messages list them.
    pub const ALL: [ImageType; 4] = [
        ImageType::Png,
        ImageType::Jpeg,
        ImageType::Gif,
        ImageType::Webp,
    ];

    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Gif => "image/gif",
            ImageType::Webp => "image/webp",
        }
    }

    /// The type a media type names, if ctxlog reads it.
    pub fn from_media_type(media_type: &str) -> Option<ImageType> {
        ImageType::ALL
            .into_iter()
            .find(|t| t.media_type().eq_ignore_ascii_case(media_type))
    }

    /// The type the bytes' magic number says, if any.
    pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageType::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageType::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageType::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(ImageType::Webp)
        } else {
            None
        }
    }
}

/// An image's type and size in pixels, read from its header; `None` when the bytes are not
/// a PNG, JPEG, GIF or WebP image whose header gives a size above zero.
pub fn dimensions(bytes: &[u8]) -> Option<(ImageType, u32, u32)> {
    let kind = ImageType::sniff(bytes)?;
    let (w, h) = match kind {
        ImageType::Png => (be32(bytes, 16)?, be32(bytes, 20)?),
        ImageType::Gif => (u32::from(le16(bytes, 6)?), u32::from(le16(bytes, 8)?)),
        ImageType::Jpeg => jpeg_size(bytes)?,
        ImageType::Webp => webp_size(bytes)?,
    };
    (w > 0 && h > 0).then_some((kind, w, h))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
}

/// A JPEG's size: from its first start-of-frame marker (SOF0–SOF15 but DHT, JPG and DAC).
fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        while *b.get(at)? == 0xFF && *b.get(at + 1)? == 0xFF {
            at += 1;
        }
        if *b.get(at)? != 0xFF {
            return None;
        }
        let marker = *b.get(at + 1)?;
        let len = usize::from(be16(b, at + 2)?);
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            let h = be16(b, at + 5)?;
            let w = be16(b, at + 7)?;
            return Some((u32::from(w), u32::from(h)));
        }
        if len < 2 {
            return None;
        }
        at += 2 + len;
    }
}

/// A WebP's size: from its `VP8 ` (lossy), `VP8L` (lossless) or `VP8X` (extended) chunk.
fn webp_size(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8 " => Some((
            u32::from(le16(b, 26)? & 0x3FFF),
            u32::from(le16(b, 28)? & 0x3FFF),
        )),
        b"VP8L" => {
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        _ => None,
    }
}

/// How much detail an OpenAI image is sent at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// `low`: a 512 × 512 view, the base tokens only.
    Low,
    /// `high`: tiles.
    High,
    /// `auto` (the API's default): the model chooses; charged as `high`.
    #[default]
    Auto,
}

impl Detail {
    /// `low`, `high` or `auto`; anything else is `None`.
    pub fn parse(text: &str) -> Option<Detail> {
        match text {
            "low" => Some(Detail::Low),
            "high" => Some(Detail::High),
            "auto" => Some(Detail::Auto),
            _ => None,
        }
    }

    /// The name sent on the wire (`low`, `high`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Low => "low",
            Detail::High => "high",
            Detail::Auto => "auto",
        }
    }
}
