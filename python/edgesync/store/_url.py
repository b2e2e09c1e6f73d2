"""PostgreSQL URLs as edgesync accepts them, checked before anything connects."""

from __future__ import annotations

from urllib.parse import urlsplit

from edgesync.errors import ConfigError

__all__ = ["check_database_url"]

_SCHEMES = {"postgresql", "postgres"}
_EXAMPLE = "postgresql://user:password@host:5432/dbname"


def check_database_url(url: str, field: str = "database_url") -> str:
    """``url`` when it is a ``postgresql://`` (or ``postgres://``) URL asyncpg can parse;
    a ConfigError naming ``field`` and the expected form otherwise. Several hosts
    (``host1:5432,host2:5432``, for a primary and its standbys with
    ``target_session_attrs=read-write``) are accepted as asyncpg accepts them; the URL is
    returned as given, never rewritten."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        for host in parts.netloc.rpartition("@")[2].split(","):
            urlsplit(f"//{host}").port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(field, f"not a PostgreSQL URL: {text!r} ({exc}); use {_EXAMPLE}"
                          ) from exc
    scheme = parts.scheme.lower()
    if not scheme or "://" not in text:
        raise ConfigError(field, f"{text!r} is not a URL; use {_EXAMPLE}")
    if scheme not in _SCHEMES:
        raise ConfigError(field, f"scheme {scheme!r} not supported: edgesync keeps its data in "
                                 f"PostgreSQL; use {_EXAMPLE}")
    return text
