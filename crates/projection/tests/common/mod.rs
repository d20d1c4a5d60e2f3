//! Helpers shared by the projection tests.

#![allow(dead_code)]

use ctxlog_event::{Event, EventBody};

/// `bodies` as events numbered from seq 1, all at time 0.
pub fn numbered(bodies: impl IntoIterator<Item = EventBody>) -> Vec<Event> {
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            seq: i as u64 + 1,
            ts_ms: 0,
            body,
        })
        .collect()
}

/// A PNG of `w` × `h` pixels as far as its header goes (signature, IHDR): what ctxlog reads
/// of an image.
pub fn png(w: u32, h: u32) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&w.to_be_bytes());
    png.extend_from_slice(&h.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    png
}

/// Media parts as a store hands them to the projector (bytes back as base64 `data`): a
/// `w` × `h` PNG, an image by URL at detail low, a two-page PDF.
pub fn media_parts(w: u32, h: u32) -> Vec<ctxlog_event::Part> {
    use ctxlog_event::Part;
    use ctxlog_event::media::Detail;
    let pdf = b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n2 0 obj <</Type /Page>> endobj\n";
    vec![
        Part::Text {
            text: "Look:".into(),
        },
        Part::Image {
            url: None,
            data: None,
            media_type: Some("image/png".into()),
            detail: Some(Detail::High),
            artifact: None,
        }
        .with_data(&png(w, h)),
        Part::Image {
            url: Some("https://example.com/cat.png".into()),
            data: None,
            media_type: None,
            detail: Some(Detail::Low),
            artifact: None,
        },
        Part::Document {
            data: None,
            media_type: "application/pdf".into(),
            name: Some("q3.pdf".into()),
            artifact: None,
        }
        .with_data(pdf),
    ]
}
