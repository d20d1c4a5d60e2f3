//! An image is stored only when its bytes decode to the size its header claims: the header is
//! what ctxlog charges tokens by, the pixels what a provider decodes and bills.
#![allow(clippy::expect_used)]

use base64::Engine as _;
use ctxlog_event::Part;
use image::{ImageFormat, RgbImage};

/// A real `w` × `h` image in `format`, as an image tool saves it (a gradient, so the encoded
/// bytes are more than a run of one colour).
fn encoded(format: ImageFormat, w: u32, h: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, 7])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode");
    out.into_inner()
}

fn part(bytes: &[u8], media_type: &str) -> Part {
    Part::Image {
        url: None,
        data: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        media_type: Some(media_type.to_owned()),
        detail: None,
        artifact: None,
    }
}

const FORMATS: [(ImageFormat, &str); 4] = [
    (ImageFormat::Png, "image/png"),
    (ImageFormat::Jpeg, "image/jpeg"),
    (ImageFormat::Gif, "image/gif"),
    (ImageFormat::WebP, "image/webp"),
];

/// CRC-32 (ISO-HDLC) as a PNG chunk carries it: a liar recomputes it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `bytes` with the size its header gives changed to `w` × `h`, everything else as it was
/// (a PNG's IHDR CRC recomputed, so only the size lies).
fn claiming(format: ImageFormat, bytes: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    match format {
        ImageFormat::Png => {
            b[16..20].copy_from_slice(&w.to_be_bytes());
            b[20..24].copy_from_slice(&h.to_be_bytes());
            let crc = crc32(&b[12..29]);
            b[29..33].copy_from_slice(&crc.to_be_bytes());
        }
        ImageFormat::Gif => {
            // The logical screen and the one frame's descriptor both say the new size.
            b[6..8].copy_from_slice(&(w as u16).to_le_bytes());
            b[8..10].copy_from_slice(&(h as u16).to_le_bytes());
            let desc = (13..b.len())
                .find(|&i| b[i] == 0x2C)
                .expect("an image descriptor");
            b[desc + 5..desc + 7].copy_from_slice(&(w as u16).to_le_bytes());
            b[desc + 7..desc + 9].copy_from_slice(&(h as u16).to_le_bytes());
        }
        ImageFormat::WebP => {
            // Lossless: the 14-bit sides minus one, packed after the VP8L signature byte.
            assert_eq!(&b[12..16], b"VP8L", "the encoder writes lossless WebP");
            let packed = u32::from_le_bytes(b[21..25].try_into().expect("4 bytes"));
            let packed = (packed & !0x0FFF_FFFF) | (w - 1) | ((h - 1) << 14);
            b[21..25].copy_from_slice(&packed.to_le_bytes());
        }
        _ => unreachable!("only the four formats ctxlog reads"),
    }
    b
}

#[test]
fn a_whole_image_of_every_type_is_stored_as_its_bytes() {
    for (format, media_type) in FORMATS {
        let bytes = encoded(format, 64, 48);
        let stored = part(&bytes, media_type).check();
        assert_eq!(stored, Ok(Some(bytes)), "{media_type}");
    }
}

#[test]
fn an_image_cut_short_is_refused_and_says_to_send_it_whole() {
    for (format, media_type) in FORMATS {
        let bytes = encoded(format, 64, 48);
        let cut = &bytes[..bytes.len() * 2 / 3];
        let err = part(cut, media_type).check().expect_err(media_type);
        assert!(err.contains("64 × 48"), "{media_type}: {err}");
        assert!(err.contains("send the whole image"), "{media_type}: {err}");
    }
}

/// A PNG, GIF or WebP whose header claims more pixels than its data holds runs out of data
/// while decoding. A JPEG whose entropy-coded scan ends at its end-of-image marker before
/// the frame is full decodes anyway (the rest grey), in libjpeg as in the decoder here: it is
/// what a provider decodes and bills, so it is stored at its header's size and not tested
/// here; a JPEG cut short before that marker is refused (above).
#[test]
fn an_image_whose_header_claims_more_pixels_than_its_bytes_hold_is_refused() {
    for (format, media_type) in FORMATS
        .into_iter()
        .filter(|(format, _)| *format != ImageFormat::Jpeg)
    {
        let bytes = claiming(format, &encoded(format, 64, 48), 640, 480);
        let err = part(&bytes, media_type).check().expect_err(media_type);
        assert!(err.contains("640 × 480"), "{media_type}: {err}");
    }
}
