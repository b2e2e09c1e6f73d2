//! Any bytes as a staged blob: decompressed within the limit or refused, never more.
#![no_main]

use edgesync_core::decompress_blob;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = decompress_blob(data, LIMIT) {
        assert!(out.len() as u64 <= LIMIT);
    }
});
