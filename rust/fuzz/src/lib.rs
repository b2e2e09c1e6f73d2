//! What the fuzz targets share: the target columns a fuzz input chooses.
//!
//! The first byte of an input picks the types of a fixed set of column names (those the
//! seed corpus uses), so the COPY encoders meet every type with every kind of value; the
//! rest of the input is the payload.

use edgesync_core::PgType;

/// Column names of the seed corpus' tables (tests' device_state, temps, fan-in rows).
const NAMES: [&str; 8] = ["id", "mode", "setpoint", "value_c", "sensor", "note", "v0", "v1"];

/// Splits an input into the target columns it chooses and the payload.
pub fn columns_and_payload(data: &[u8]) -> (Vec<(String, PgType)>, &[u8]) {
    let Some((&pick, payload)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let columns = NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ty = PgType::ALL[(usize::from(pick) + i * 3) % PgType::ALL.len()];
            ((*name).to_owned(), ty)
        })
        .collect();
    (columns, payload)
}

/// The device id the encoders put first on each line when batches share a stream.
pub const DEVICE: &str = "0190f0e5-7a3c-7000-8000-000000000001";
