"""docs/grafana-edgesync.json: valid JSON, linked from docs/operations.md, and every metric
its queries use is in the catalogue there (a renamed metric breaks this, not a panel)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_dashboard_uses_only_catalogued_metrics() -> None:
    dash = json.loads((DOCS / "grafana-edgesync.json").read_text())
    catalogue = (DOCS / "operations.md").read_text()
    assert "(grafana-edgesync.json)" in catalogue
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    used = {re.sub(r"_(bucket|sum|count)$", "", m)
            for e in exprs for m in re.findall(r"edgesync_[a-z_]+", e)}
    missing = sorted(m for m in used if f"`{m}" not in catalogue
                     and f"`{m.removesuffix('_total')}" not in catalogue)
    assert missing == []
