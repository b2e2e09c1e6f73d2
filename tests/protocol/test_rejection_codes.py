"""The rejection codes have one owner (``edgesync.protocol.RejectionCode``) that agrees
with the Rust decoders and with docs/protocol.md (as pydantic-core checks its error
types against the Rust ones)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgesync import _core
from edgesync.errors import BatchRejected
from edgesync.protocol import DECODER_CODES, RejectionCode

_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _documented_codes() -> list[str]:
    """The first column of the table under ``## Rejection codes``."""
    text = _DOC.read_text()
    section = text.split("\n## Rejection codes\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE)


def test_rust_codes_are_the_decoder_subset_of_the_enum() -> None:
    rust = _core.REJECTION_CODES
    assert len(rust) == len(set(rust)), "a Rust code is listed twice"
    assert set(rust) == {c.value for c in DECODER_CODES}


def test_enum_members_are_spelled_as_their_values() -> None:
    for code in RejectionCode:
        assert code.name.lower() == code.value


def test_protocol_doc_lists_exactly_the_enum() -> None:
    documented = _documented_codes()
    assert len(documented) == len(set(documented)), "a code is documented twice"
    assert set(documented) == {c.value for c in RejectionCode}


@pytest.mark.parametrize("payload, code", [
    (b"{", RejectionCode.MALFORMED_JSON),
    (b'{"device_id": "x"}', RejectionCode.ENVELOPE_UNSTRIPPED_TENANT_FIELDS),
    (b"{}", RejectionCode.INVALID_FORMAT_VERSION),
])
def test_a_rust_rejection_compares_equal_to_its_member(payload: bytes,
                                                        code: RejectionCode) -> None:
    with pytest.raises(BatchRejected) as info:
        _core.decode_row_batch(payload)
    assert info.value.code == code
    assert RejectionCode(info.value.code) is code
