//! zstd compression of staged blobs (snapshot / spill objects).

use zstd::zstd_safe::{self, DCtx, InBuffer, OutBuffer};

use crate::error::CoreError;

const CHUNK: usize = 128 * 1024;

/// One zstd frame of `data` at `level`, with the content size in the frame
/// header and a content checksum (so corruption is detected on decompress).
pub fn compress_blob(data: &[u8], level: i32) -> Result<Vec<u8>, CoreError> {
    let range = zstd::compression_level_range();
    if !range.contains(&level) {
        return Err(CoreError::Blob(format!(
            "zstd level {level} outside {}..={}",
            range.start(),
            range.end()
        )));
    }
    let mut compressor = zstd::bulk::Compressor::new(level)
        .map_err(|e| CoreError::Blob(format!("zstd init: {e}")))?;
    compressor
        .include_contentsize(true)
        .map_err(|e| CoreError::Blob(format!("zstd parameter: {e}")))?;
    compressor
        .set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
        .map_err(|e| CoreError::Blob(format!("zstd parameter: {e}")))?;
    compressor
        .compress(data)
        .map_err(|e| CoreError::Blob(format!("zstd compress: {e}")))
}

/// Decompresses one or more concatenated zstd frames, refusing output larger
/// than `max_size`, corrupt or truncated input, and trailing garbage.
/// Frames without a content size (streaming writers) are accepted.
pub fn decompress_blob(data: &[u8], max_size: u64) -> Result<Vec<u8>, CoreError> {
    inflate(data, max_size).map_err(|e| CoreError::Blob(e.to_string()))
}

/// Why [`inflate`] refused its input: callers map the two kinds to their own errors
/// (a staged blob's [`CoreError::Blob`], a compressed batch's rejection codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InflateError {
    /// The output would pass the limit; nothing past it was allocated.
    TooLarge(String),
    /// Not zstd, corrupt, truncated, or followed by garbage.
    Corrupt(String),
}

impl std::fmt::Display for InflateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InflateError::TooLarge(s) | InflateError::Corrupt(s) => f.write_str(s),
        }
    }
}

/// The bounded decompression both blobs and compressed batches use: the output grows
/// a chunk at a time and is refused as soon as it would pass `max_size`, so a
/// decompression bomb costs at most `max_size` + one chunk of memory.
pub(crate) fn inflate(data: &[u8], max_size: u64) -> Result<Vec<u8>, InflateError> {
    if data.is_empty() {
        return Err(InflateError::Corrupt(
            "empty input is not a zstd frame".into(),
        ));
    }
    let max = usize::try_from(max_size).unwrap_or(usize::MAX);
    let mut initial = 0usize;
    match zstd_safe::get_frame_content_size(data) {
        Ok(Some(size)) if size > max_size => {
            return Err(InflateError::TooLarge(format!(
                "decompressed size {size} exceeds limit {max_size}"
            )));
        }
        Ok(Some(size)) => initial = usize::try_from(size).unwrap_or(0).min(64 << 20),
        Ok(None) => {}
        Err(_) => {
            return Err(InflateError::Corrupt(
                "not a zstd frame (bad header)".into(),
            ))
        }
    }

    let mut dctx = DCtx::create();
    let mut input = InBuffer::around(data);
    let mut out: Vec<u8> = Vec::with_capacity(initial);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let mut output = OutBuffer::around(&mut chunk[..]);
        let hint = dctx
            .decompress_stream(&mut output, &mut input)
            .map_err(|code| {
                InflateError::Corrupt(format!(
                    "corrupt zstd data: {}",
                    zstd_safe::get_error_name(code)
                ))
            })?;
        let produced = output.pos();
        if out.len().saturating_add(produced) > max {
            return Err(InflateError::TooLarge(format!(
                "decompressed size exceeds limit {max_size}"
            )));
        }
        out.extend_from_slice(&chunk[..produced]);
        let consumed_all = input.pos() == data.len();
        if hint == 0 {
            if consumed_all {
                return Ok(out);
            }
            // Another frame follows; the context resets itself.
            continue;
        }
        if consumed_all && produced < CHUNK {
            return Err(InflateError::Corrupt("truncated zstd frame".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sample() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn roundtrip_and_content_size_in_header() {
        let data = sample();
        let z = compress_blob(&data, 3).unwrap();
        assert!(z.len() < data.len());
        assert_eq!(
            zstd_safe::get_frame_content_size(&z).unwrap(),
            Some(data.len() as u64)
        );
        assert_eq!(decompress_blob(&z, data.len() as u64).unwrap(), data);
        assert_eq!(zstd::decode_all(&z[..]).unwrap(), data);
    }

    #[test]
    fn empty_roundtrip() {
        let z = compress_blob(b"", 3).unwrap();
        assert_eq!(decompress_blob(&z, 0).unwrap(), b"");
    }

    #[test]
    fn max_size_enforced_from_header_and_stream() {
        let data = sample();
        let z = compress_blob(&data, 1).unwrap();
        assert!(matches!(
            decompress_blob(&z, data.len() as u64 - 1),
            Err(CoreError::Blob(_))
        ));
        // A streaming frame without content size is caught while decoding.
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.write_all(&data).unwrap();
        let streamed = enc.finish().unwrap();
        assert_eq!(zstd_safe::get_frame_content_size(&streamed).unwrap(), None);
        assert_eq!(decompress_blob(&streamed, 1 << 31).unwrap(), data);
        assert!(matches!(
            decompress_blob(&streamed, 1000),
            Err(CoreError::Blob(_))
        ));
    }

    #[test]
    fn concatenated_frames() {
        let mut z = compress_blob(b"hello ", 3).unwrap();
        z.extend(compress_blob(b"world", 3).unwrap());
        assert_eq!(decompress_blob(&z, 100).unwrap(), b"hello world");
    }

    #[test]
    fn corrupt_truncated_and_trailing_garbage() {
        let data = sample();
        let z = compress_blob(&data, 3).unwrap();
        for bad in [
            &b""[..],
            b"not zstd at all",
            &z[..z.len() / 2],
            &z[..z.len() - 1],
            &z[..4],
        ] {
            assert!(
                matches!(decompress_blob(bad, 1 << 31), Err(CoreError::Blob(_))),
                "len {}",
                bad.len()
            );
        }
        let mut flipped = z.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xff;
        assert!(decompress_blob(&flipped, 1 << 31).is_err());
        let mut trailing = z.clone();
        trailing.extend_from_slice(b"garbage");
        assert!(decompress_blob(&trailing, 1 << 31).is_err());
    }

    #[test]
    fn bad_level() {
        assert!(matches!(compress_blob(b"x", 1000), Err(CoreError::Blob(_))));
        assert!(compress_blob(b"x", 19).is_ok());
        assert!(compress_blob(b"x", -5).is_ok());
    }
}
