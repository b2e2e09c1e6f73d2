"""The console's ``js/vocabulary.js`` is what ``edgesync.api._vocabulary`` writes from the
enums, and the console's modules compare with its words, not with spelled-out codes."""

from __future__ import annotations

import re

from edgesync.api._console import ASSETS
from edgesync.api._vocabulary import (
    CLIENT_VOCABULARY,
    VOCABULARY,
    VOCABULARY_JS,
    VOCABULARY_PY,
    render,
    render_python,
)
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


def test_the_clients_python_vocabulary_is_up_to_date_and_loads_nothing() -> None:
    """``edgesync/_vocabulary.py`` (the TUI's and the CLI's words) is what the enums write,
    and it is the same words as the enums, member by member."""
    import edgesync._vocabulary as mirror

    assert VOCABULARY_PY.read_text() == render_python(), (
        "run: python -m edgesync.api._vocabulary (and commit edgesync/_vocabulary.py)")
    for vocabulary in CLIENT_VOCABULARY:
        copy = getattr(mirror, vocabulary.__name__)
        assert [(m.name, m.value) for m in copy] == [(m.name, m.value) for m in vocabulary]
    imports = [line for line in VOCABULARY_PY.read_text().splitlines()
               if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations", "import enum"]
