"""Runs ``edgesync`` CLI commands in-process against a test API, capturing their output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from edgesync import cli

__all__ = ["Cli"]


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], api_url: str, tenant) -> None:
        self.capsys = capsys
        self.conn = ["--api-url", api_url, "--token", tenant.admin_token,
                     "--org-id", str(tenant.org_id), "--project", str(tenant.project_id)]

    def __call__(self, *args: str, ok: bool = True) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main([*args, *self.conn])
        out, err = self.capsys.readouterr()
        if ok:
            assert code == 0, (args, out, err)
        return code, out, err

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--output", "json")[1])
