//! A table description from arbitrary text (one column a line: name, declared type,
//! pk ordinal, not null, tab-separated): fingerprinted, or refused with a schema error;
//! the same description always gives the same hash.
#![no_main]

use edgesync_core::{schema_fingerprint, ColumnSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let table = lines.next().unwrap_or_default();
    let columns: Vec<ColumnSpec> = lines
        .map(|line| {
            let mut f = line.split('\t');
            let name = f.next().unwrap_or_default();
            let declared = f.next().unwrap_or_default();
            let pk = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let not_null = f.next() == Some("1");
            ColumnSpec::new(name, declared, pk, not_null)
        })
        .collect();
    if let Ok(fp) = schema_fingerprint(table, &columns) {
        let again = schema_fingerprint(table, &columns).expect("deterministic");
        assert_eq!(fp.schema_hash, again.schema_hash);
        assert_eq!(fp.schema_hash.len(), 64);
    }
});
