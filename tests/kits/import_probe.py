"""Run code in a fresh interpreter: what it imports, and the CLI with modules hidden."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence


def loaded_by(code: str) -> set[str]:
    """Top-level packages in ``sys.modules`` after running ``code`` in a new interpreter."""
    probe = (code + "\nimport json, sys\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def main_without(hidden: Sequence[str], argv: Sequence[str]
                 ) -> subprocess.CompletedProcess[str]:
    """``edgesync ARGV`` in a new interpreter where ``hidden`` cannot be imported, as on an
    install without the extra that brings them."""
    code = ("import sys\n"
            f"for name in {list(hidden)!r}:\n"
            "    sys.modules[name] = None  # import fails, find_spec finds nothing\n"
            "from edgesync.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, check=False)
