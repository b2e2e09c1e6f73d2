//! Any bytes through `parse_json`; a parsed document's canonical form parses again to
//! the same canonical form (the fingerprint and pk hash depend on it).
#![no_main]

use edgesync_core::canonical::to_canonical;
use edgesync_core::envelope::parse_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = parse_json(data) else {
        return;
    };
    let canonical = to_canonical(&value);
    let again = parse_json(&canonical).expect("canonical JSON parses");
    assert_eq!(to_canonical(&again), canonical);
});
