"""The source distribution builds the wheel on a machine with a Rust toolchain: `maturin
sdist`, then `pip install` of that sdist (no extras) into a fresh virtualenv, where the
agent imports and a cloud command says what to install. The sdist carries the package data
(migrations, the web console's files) that the wheel built from it needs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MATURIN = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")


def run(argv: list[str], timeout: float, **kw: object) -> subprocess.CompletedProcess[str]:
    out: subprocess.CompletedProcess[str] = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False,
        **kw)  # type: ignore[call-overload]
    assert out.returncode == 0, f"{argv}: {out.stderr[-3000:]}"
    return out


@pytest.mark.once
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_pip_installs_from_the_sdist(tmp_path: Path) -> None:
    assert MATURIN, "maturin is a build requirement (pip install maturin)"
    run([MATURIN, "sdist", "--out", str(tmp_path / "sdist")], 300, cwd=ROOT)
    [sdist] = (tmp_path / "sdist").glob("edgesync-*.tar.gz")
    with tarfile.open(sdist) as tar:  # package data a packager's wheel needs too
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"python/edgesync/api/console/index.html", "python/edgesync/api/console/js/app.js",
            "python/edgesync/store/migrations/0001_foundation.sql"} <= names
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = str(env_dir / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", str(sdist)], 1500,
        env={"PATH": f"{env_dir / 'bin'}:{Path.home() / '.cargo' / 'bin'}:/usr/bin:/bin",
             "HOME": str(Path.home()), "CARGO_TARGET_DIR": str(tmp_path / "target")})
    out = run([py, "-c", "import edgesync.agent, edgesync._core; print(edgesync._core.__file__)"],
              60, cwd=tmp_path)
    assert str(env_dir) in out.stdout
    serve = subprocess.run([str(env_dir / "bin" / "edgesync"), "serve"], capture_output=True,
                           text=True, timeout=60, check=False, cwd=tmp_path)
    assert serve.returncode == 2
    assert "pip install 'edgesync[server]'" in serve.stderr
