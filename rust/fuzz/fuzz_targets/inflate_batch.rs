//! Any bytes as a compressed batch: inflated within the batch limit (then decoded as
//! both kinds of batch) or refused with payload_too_large / malformed_json.
#![no_main]

use edgesync_core::{
    decode_row_batch, decode_telemetry_batch, inflate_batch, RejectionCode, MAX_BATCH_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match inflate_batch(data, MAX_BATCH_BYTES) {
        Ok(json) => {
            assert!(json.len() <= MAX_BATCH_BYTES);
            let _ = decode_row_batch(&json);
            let _ = decode_telemetry_batch(&json);
        }
        Err(e) => assert!(
            matches!(
                e.code(),
                Some(RejectionCode::PayloadTooLarge | RejectionCode::MalformedJson)
            ),
            "{e}"
        ),
    }
});
