"""The console's ``js/vocabulary.js`` is what ``edgesync.api._vocabulary`` writes from the
enums, and the console's modules compare with its words, not with spelled-out codes."""

from __future__ import annotations

import re

from edgesync.api._console import ASSETS
from edgesync.api._vocabulary import VOCABULARY, VOCABULARY_JS, render
from edgesync.errors import ApiErrorCode


def test_the_committed_module_is_up_to_date() -> None:
    assert VOCABULARY_JS.read_text() == render(), (
        "run: python -m edgesync.api._vocabulary (and commit console/js/vocabulary.js)")


def test_each_enum_is_one_frozen_object() -> None:
    text = render()
    for vocabulary in VOCABULARY:
        assert f"export const {vocabulary.__name__} = Object.freeze({{" in text
        assert all(f'  {m.name}: "{m.value}",' in text for m in vocabulary)


def test_the_console_spells_no_api_error_code() -> None:
    """A code the API answers with, quoted in a console module other than the vocabulary,
    is a copy that can drift (``"NETWORK"`` is the console's own, not the API's)."""
    codes = {c.value for c in ApiErrorCode}
    found = [(p.name, word) for p in sorted(ASSETS.rglob("*.js")) if p != VOCABULARY_JS
             for word in re.findall(r"""["']([A-Za-z_]+)["']""", p.read_text())
             if word in codes]
    assert found == []
