//! A row batch payload: decoded and validated; when valid, encoded as COPY text and
//! binary for the columns the input picks. Any input: an error or a result, no panic.
#![no_main]

use edgesync_core::{binary_supported, decode_row_batch, RejectionCode};
use edgesync_fuzz::{columns_and_payload, DEVICE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (columns, payload) = columns_and_payload(data);
    let Ok(batch) = decode_row_batch(payload) else {
        return;
    };
    assert!(!batch.rows.is_empty());
    for device in [None, Some(DEVICE)] {
        let text = batch.encode_state_copy(&columns, device);
        if let Err(e) = &text {
            assert_eq!(e.code(), Some(RejectionCode::ValueTypeMismatch), "{e}");
        }
        if binary_supported(&columns) {
            let binary = batch.encode_state_binary(&columns, device);
            // The two formats accept and refuse the same rows.
            assert_eq!(text.is_ok(), binary.is_ok(), "{text:?} / {binary:?}");
        }
    }
});
