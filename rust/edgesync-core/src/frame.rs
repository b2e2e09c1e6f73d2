//! Compressed batches (an edgesync extension of the protocol, docs/protocol.md).
//!
//! A device may publish a row or telemetry batch as one zstd frame whose content is
//! exactly the JSON it would have sent plain. The cloud tells the two apart by the
//! frame's magic number (no JSON text starts with it) and inflates the frame before
//! the batch decoders see it, so every check, the ledger and staging work on the same
//! bytes as for a plain batch. The batch limits apply to the inflated JSON: a frame
//! that would inflate past them is refused while inflating, without the output ever
//! being allocated whole.

use crate::blob::{inflate, InflateError};
use crate::error::CoreError;
use crate::rejection::RejectionCode;

/// The first four bytes of every zstd frame (RFC 8878, little-endian 0xFD2FB528).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Whether `payload` is a compressed batch rather than plain JSON.
pub fn is_compressed(payload: &[u8]) -> bool {
    payload.starts_with(&ZSTD_MAGIC)
}

/// The JSON of a compressed batch, at most `max_bytes` long: `payload_too_large` when
/// it would be longer, `malformed_json` when the frame is corrupt or truncated.
pub fn inflate_batch(payload: &[u8], max_bytes: usize) -> Result<Vec<u8>, CoreError> {
    inflate(payload, max_bytes as u64).map_err(|e| match e {
        InflateError::TooLarge(_) => CoreError::rejected(
            RejectionCode::PayloadTooLarge,
            None,
            format!(
                "the compressed batch ({} bytes) inflates past the {max_bytes}-byte limit",
                payload.len()
            ),
        ),
        InflateError::Corrupt(why) => CoreError::rejected(
            RejectionCode::MalformedJson,
            None,
            format!("the compressed batch is not a whole zstd frame: {why}"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::compress_blob;
    use std::io::Write;

    #[test]
    fn plain_json_is_never_taken_for_a_frame() {
        assert!(!is_compressed(b"{\"batch_id\":1}"));
        assert!(!is_compressed(b" {}"));
        assert!(!is_compressed(b""));
        assert!(is_compressed(&compress_blob(b"{}", 3).unwrap()));
    }

    #[test]
    fn inflates_to_exactly_the_json() {
        let json = br#"{"rows":[1,2,3]}"#;
        let frame = compress_blob(json, 3).unwrap();
        assert_eq!(inflate_batch(&frame, 1024).unwrap(), json);
        assert_eq!(inflate_batch(&frame, json.len()).unwrap(), json);
    }

    #[test]
    fn a_bomb_is_refused_by_its_header_or_while_inflating() {
        // 64 MiB of zeros: a few KiB compressed.
        let zeros = vec![0u8; 64 << 20];
        let framed = compress_blob(&zeros, 3).unwrap();
        assert!(framed.len() < 64 * 1024);
        let err = inflate_batch(&framed, 512 * 1024).unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::PayloadTooLarge));
        // The same without a content size in the header: caught chunk by chunk.
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.write_all(&zeros).unwrap();
        let streamed = enc.finish().unwrap();
        let err = inflate_batch(&streamed, 512 * 1024).unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::PayloadTooLarge));
        // One byte over the limit is over.
        let json = vec![b' '; 1001];
        let frame = compress_blob(&json, 3).unwrap();
        let err = inflate_batch(&frame, 1000).unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::PayloadTooLarge));
    }

    #[test]
    fn corrupt_frames_are_malformed() {
        let frame = compress_blob(&vec![b'x'; 5000], 3).unwrap();
        for bad in [&frame[..4], &frame[..frame.len() - 1]] {
            let err = inflate_batch(bad, 1 << 20).unwrap_err();
            assert_eq!(err.code(), Some(RejectionCode::MalformedJson), "{err}");
        }
        let mut trailing = frame.clone();
        trailing.extend_from_slice(b"{}");
        let err = inflate_batch(&trailing, 1 << 20).unwrap_err();
        assert_eq!(err.code(), Some(RejectionCode::MalformedJson));
    }
}
