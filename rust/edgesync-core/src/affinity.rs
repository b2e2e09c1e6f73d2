//! SQLite type affinity (<https://www.sqlite.org/datatype3.html>, section 3.1).

use std::fmt;

/// The five SQLite column affinities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Affinity {
    Integer,
    Text,
    Blob,
    Real,
    Numeric,
}

impl Affinity {
    /// Upper-case name as used in schema fingerprints.
    pub fn as_str(self) -> &'static str {
        match self {
            Affinity::Integer => "INTEGER",
            Affinity::Text => "TEXT",
            Affinity::Blob => "BLOB",
            Affinity::Real => "REAL",
            Affinity::Numeric => "NUMERIC",
        }
    }

    /// Exact affinity name (as written by [`Affinity::as_str`]), nothing else.
    pub fn from_name(name: &str) -> Option<Affinity> {
        match name {
            "INTEGER" => Some(Affinity::Integer),
            "TEXT" => Some(Affinity::Text),
            "BLOB" => Some(Affinity::Blob),
            "REAL" => Some(Affinity::Real),
            "NUMERIC" => Some(Affinity::Numeric),
            _ => None,
        }
    }
}

impl fmt::Display for Affinity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Affinity of a declared column type, applying SQLite's rules in SQLite's order.
pub fn sqlite_affinity(declared_type: &str) -> Affinity {
    let upper = declared_type.to_ascii_uppercase();
    let has = |needle: &str| upper.contains(needle);
    if has("INT") {
        Affinity::Integer
    } else if has("CHAR") || has("CLOB") || has("TEXT") {
        Affinity::Text
    } else if has("BLOB") || upper.trim().is_empty() {
        Affinity::Blob
    } else if has("REAL") || has("FLOA") || has("DOUB") {
        Affinity::Real
    } else {
        Affinity::Numeric
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_documented_examples() {
        let cases = [
            ("INT", "INTEGER"),
            ("INTEGER", "INTEGER"),
            ("TINYINT", "INTEGER"),
            ("UNSIGNED BIG INT", "INTEGER"),
            ("INT8", "INTEGER"),
            ("CHARACTER(20)", "TEXT"),
            ("VARCHAR(10)", "TEXT"),
            ("NATIVE CHARACTER(70)", "TEXT"),
            ("CLOB", "TEXT"),
            ("TEXT", "TEXT"),
            ("BLOB", "BLOB"),
            ("", "BLOB"),
            ("REAL", "REAL"),
            ("DOUBLE", "REAL"),
            ("DOUBLE PRECISION", "REAL"),
            ("FLOAT", "REAL"),
            ("NUMERIC", "NUMERIC"),
            ("DECIMAL(10,5)", "NUMERIC"),
            ("BOOLEAN", "NUMERIC"),
            ("DATE", "NUMERIC"),
            ("DATETIME", "NUMERIC"),
        ];
        for (decl, want) in cases {
            assert_eq!(sqlite_affinity(decl).as_str(), want, "declared {decl:?}");
        }
    }

    #[test]
    fn rule_order_edge_cases() {
        // "FLOATING POINT" contains "INT" (rule 1 wins over rule 4).
        assert_eq!(sqlite_affinity("FLOATING POINT"), Affinity::Integer);
        assert_eq!(sqlite_affinity("CHARINT"), Affinity::Integer);
        // "BLOBTEXT" hits rule 2 before rule 3.
        assert_eq!(sqlite_affinity("BLOBTEXT"), Affinity::Text);
        // The classic gotcha: "STRING" has none of the substrings.
        assert_eq!(sqlite_affinity("STRING"), Affinity::Numeric);
        assert_eq!(sqlite_affinity("JSON"), Affinity::Numeric);
    }

    #[test]
    fn case_insensitive() {
        assert_eq!(sqlite_affinity("varchar(3)"), Affinity::Text);
        assert_eq!(sqlite_affinity("Double"), Affinity::Real);
        assert_eq!(sqlite_affinity("bigint"), Affinity::Integer);
    }

    #[test]
    fn affinity_names_map_to_themselves() {
        for a in [
            Affinity::Integer,
            Affinity::Text,
            Affinity::Blob,
            Affinity::Real,
            Affinity::Numeric,
        ] {
            assert_eq!(sqlite_affinity(a.as_str()), a);
            assert_eq!(Affinity::from_name(a.as_str()), Some(a));
            assert_eq!(a.to_string(), a.as_str());
        }
        assert_eq!(Affinity::from_name("integer"), None);
    }
}
