"""Parsers of ``edgesync lineages resnapshot|resnapshots|verify|verifications``
(docs/recovery.md); the commands are ``edgesync.client._run_recovery``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_recovery_parsers"]


def add_recovery_parsers(lsub: Any, sub: Callable[..., Any], api_options: Callable[..., None],
                         paging: Callable[..., None]) -> None:
    res = sub(lsub, "resnapshot", "ask the device to send a state table's rows again",
              "Ask the device to send the table's current rows again (all, or those a "
              "structured filter selects: never SQL). They are merged newer-wins with live "
              "changes. --where COL:OP:VALUE (op eq, ne, lt, le, gt, ge, in with a JSON "
              "list, is_null, not_null; VALUE is JSON or a bare string), --from/--to "
              "COL=VALUE (a primary-key range, from inclusive, to exclusive, every key "
              "column), --bucket HEX (pk-hash prefixes, all of one length), or --filter FILE "
              "(the JSON filter). --wait follows it to the end.")
    res.add_argument("lineage_id", type=uuid.UUID)
    res.add_argument("--where", action="append", default=[], metavar="COL:OP:VALUE")
    res.add_argument("--from", dest="key_from", action="append", default=[],
                     metavar="COL=VALUE", help="key range start (inclusive)")
    res.add_argument("--to", dest="key_to", action="append", default=[],
                     metavar="COL=VALUE", help="key range end (exclusive)")
    res.add_argument("--bucket", action="append", default=[], metavar="HEX",
                     help="only rows whose _edge_pk_hash starts with HEX (repeatable)")
    res.add_argument("--filter", dest="filter_file", type=Path, default=None, metavar="FILE",
                     help="the whole filter as JSON ('-': standard input)")
    _wait(res)
    api_options(res)

    ver = sub(lsub, "verify", "compare the device's table with the cloud's mirror",
              "Ask the device for a digest of the table (row count and a hash per bucket of "
              "the primary-key hash, over the approved mirrored columns) and compare it with "
              "the mirror. --repair re-snapshots the buckets that differ. --wait prints the "
              "result.")
    ver.add_argument("lineage_id", type=uuid.UUID)
    ver.add_argument("--prefix", type=int, default=2, metavar="N",
                     help="hex digits of the pk hash per bucket, 1 to 3 (default 2: 256)")
    ver.add_argument("--repair", action="store_true",
                     help="re-snapshot the differing buckets")
    _wait(ver)
    api_options(ver)

    for name, what in (("resnapshots", "re-snapshots of a lineage and their progress"),
                       ("verifications", "verifications of a lineage and their results")):
        p = sub(lsub, name, what, f"List the {what}, newest first.")
        p.add_argument("lineage_id", type=uuid.UUID)
        paging(p)
        api_options(p)


def _wait(p: Any) -> None:
    p.add_argument("--wait", action="store_true", help="poll until it is finished")
    p.add_argument("--wait-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="with --wait: give up after this long (default 600)")
