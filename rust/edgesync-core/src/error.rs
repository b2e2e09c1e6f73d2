//! The one error type of edgesync-core.

use std::fmt;

use crate::rejection::RejectionCode;

/// Every failure edgesync-core reports.
///
/// The Python binding converts each variant, in one place, to the matching
/// exception class of `edgesync.errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A device payload failed validation; `code` is the protocol rejection code.
    Rejected {
        code: RejectionCode,
        field: Option<String>,
        detail: String,
    },
    /// A table description that cannot be fingerprinted (or an unknown column type).
    Schema(String),
    /// A blob that cannot be compressed or decompressed.
    Blob(String),
    /// A failure of SQLite, or of finding it: `code` is SQLite's (extended) result
    /// code, None when the library or one of its functions could not be had.
    Sqlite { code: Option<i32>, message: String },
}

impl CoreError {
    /// Shorthand for a [`CoreError::Rejected`].
    pub fn rejected(code: RejectionCode, field: Option<String>, detail: impl Into<String>) -> Self {
        CoreError::Rejected {
            code,
            field,
            detail: detail.into(),
        }
    }

    /// The rejection code, if this is a [`CoreError::Rejected`].
    pub fn code(&self) -> Option<RejectionCode> {
        match self {
            CoreError::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The offending field, if this is a [`CoreError::Rejected`] naming one.
    pub fn field(&self) -> Option<&str> {
        match self {
            CoreError::Rejected { field, .. } => field.as_deref(),
            _ => None,
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::Rejected {
                code,
                field: Some(field),
                detail,
            } => write!(f, "{code} (field {field}): {detail}"),
            CoreError::Rejected {
                code,
                field: None,
                detail,
            } => write!(f, "{code}: {detail}"),
            CoreError::Schema(msg) => write!(f, "schema error: {msg}"),
            CoreError::Blob(msg) => write!(f, "blob error: {msg}"),
            CoreError::Sqlite {
                code: Some(code),
                message,
            } => write!(f, "SQLite error {code}: {message}"),
            CoreError::Sqlite {
                code: None,
                message,
            } => write!(f, "SQLite unavailable: {message}"),
        }
    }
}

impl std::error::Error for CoreError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_rejected_with_and_without_field() {
        let e = CoreError::rejected(
            RejectionCode::InvalidRow,
            Some("rows[0].op".into()),
            "bad op",
        );
        assert_eq!(e.to_string(), "invalid_row (field rows[0].op): bad op");
        assert_eq!(e.code(), Some(RejectionCode::InvalidRow));
        assert_eq!(e.field(), Some("rows[0].op"));
        let e = CoreError::rejected(RejectionCode::MalformedJson, None, "eof");
        assert_eq!(e.to_string(), "malformed_json: eof");
        assert_eq!(e.field(), None);
    }

    #[test]
    fn display_schema_and_blob() {
        assert_eq!(CoreError::Schema("x".into()).to_string(), "schema error: x");
        assert_eq!(CoreError::Blob("y".into()).to_string(), "blob error: y");
        assert_eq!(CoreError::Blob("y".into()).code(), None);
        let boxed: Box<dyn std::error::Error> = Box::new(CoreError::Blob("z".into()));
        assert!(boxed.to_string().contains('z'));
    }

    #[test]
    fn display_sqlite() {
        let e = CoreError::Sqlite {
            code: Some(5),
            message: "step: database is locked".into(),
        };
        assert_eq!(e.to_string(), "SQLite error 5: step: database is locked");
        let e = CoreError::Sqlite {
            code: None,
            message: "no symbol".into(),
        };
        assert_eq!(e.to_string(), "SQLite unavailable: no symbol");
        assert_eq!(e.code(), None);
    }
}
