"""``table_strategies``: how each table of a device replicates, as the agent's YAML and a
sync policy of the cloud both spell it (table → ``{strategy, ts_column?, include_columns?,
priority?}``).

A pushed sync policy travels to the agents as this JSON (the ``sync_policy`` control), so
both sides read and check it with the functions here: the cloud before it stores a policy,
the agent before it applies one, and the agent's YAML by the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from edgesync.errors import ConfigError
from edgesync.protocol._strategy_kind import StrategyKind

__all__ = ["TableStrategy", "check_table_strategies", "parse_table_strategies",
           "read_table_strategy", "table_strategies_doc"]

_KEYS = ("strategy", "ts_column", "include_columns", "priority")
# Without a ``priority``: state changes before telemetry (lower goes first).
_DEFAULT_PRIORITY = {StrategyKind.ROWS: 0, StrategyKind.TELEMETRY: 10, StrategyKind.IGNORE: 0}
_LOWEST_PRIORITY = 1_000_000


@dataclass(frozen=True, slots=True)
class TableStrategy:
    strategy: StrategyKind = StrategyKind.ROWS
    ts_column: str | None = None
    include_columns: tuple[str, ...] | None = None
    # The order a flush sends tables in, lower first; None: 0 for rows, 10 for telemetry.
    priority: int | None = None

    @property
    def rank(self) -> int:
        """The priority in force (the given one, else the strategy's default)."""
        return self.priority if self.priority is not None else _DEFAULT_PRIORITY[self.strategy]

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", StrategyKind(self.strategy))
        if self.include_columns is not None and not isinstance(self.include_columns, tuple):
            object.__setattr__(self, "include_columns", tuple(self.include_columns))


def read_table_strategy(doc: Mapping[Any, Any], at: str, errors: list[ConfigError]
                        ) -> TableStrategy | None:
    """One table's mapping read key by key (its rules are ``check_table_strategies``'s);
    ``None`` with every problem appended to ``errors``."""
    problems = len(errors)
    strategy = doc.get("strategy", StrategyKind.ROWS.value)
    if "strategy" not in doc:
        errors.append(ConfigError(f"{at}.strategy", "required section or key is missing"))
    elif strategy not in {s.value for s in StrategyKind}:
        errors.append(ConfigError(f"{at}.strategy", f"{strategy!r} is not allowed; use "
                                                    "'rows', 'telemetry' or 'ignore'"))
    ts_column = doc.get("ts_column")
    if ts_column is not None and not isinstance(ts_column, str):
        errors.append(ConfigError(f"{at}.ts_column",
                                  "must be a string (quote the value in the YAML)"))
    include = doc.get("include_columns")
    if include is not None and not (isinstance(include, list)
                                    and all(isinstance(c, str) for c in include)):
        errors.append(ConfigError(f"{at}.include_columns",
                                  "must be a list of strings, e.g. [a, b]"))
    priority = doc.get("priority")
    if priority is not None and not (isinstance(priority, int) and not isinstance(priority, bool)
                                     and 0 <= priority <= _LOWEST_PRIORITY):
        errors.append(ConfigError(f"{at}.priority", "must be an integer from 0 to "
                                                    f"{_LOWEST_PRIORITY} (lower goes first)"))
    errors.extend(ConfigError(f"{at}.{key}", "unknown key") for key in doc if key not in _KEYS)
    if len(errors) > problems:
        return None
    return TableStrategy(strategy=strategy, ts_column=ts_column,
                         include_columns=tuple(include) if include is not None else None,
                         priority=priority)


def check_table_strategies(tables: Mapping[str, TableStrategy], base: str,
                           errors: list[ConfigError]) -> dict[str, TableStrategy]:
    """The rules of ``table_strategies`` (the agent's YAML, a sync policy of the cloud and
    the ``sync_policy`` control share them); each problem is appended to ``errors``."""
    strategies: dict[str, TableStrategy] = {}
    for table, ts in tables.items():
        at = f"{base}.{table}"
        if not table.strip():
            errors.append(ConfigError(at, "a table name must not be empty"))
            continue
        if table.startswith(("sqlite_", "__edgesync_")):
            # Internal tables never replicate: "ignore" is harmless, anything else a mistake.
            if ts.strategy != StrategyKind.IGNORE:
                errors.append(ConfigError(f"{at}.strategy", "internal tables cannot be replicated"))
            continue
        if ts.strategy == StrategyKind.TELEMETRY and not ts.ts_column:
            errors.append(ConfigError(f"{at}.ts_column", "required for strategy telemetry"))
        if ts.strategy != StrategyKind.TELEMETRY:
            for key in ("ts_column", "include_columns"):
                if getattr(ts, key) is not None:
                    errors.append(ConfigError(f"{at}.{key}", "only valid with strategy telemetry"))
        if ts.include_columns is not None and len(set(ts.include_columns)) != len(
                ts.include_columns):
            errors.append(ConfigError(f"{at}.include_columns", "names a column twice"))
        strategies[table] = ts
    return strategies


def table_strategies_doc(strategies: Mapping[str, TableStrategy]) -> dict[str, dict[str, Any]]:
    """``table_strategies`` as the YAML (and a sync policy) spells them: unset keys left out,
    plain strings (YAML's safe dumper represents no enum)."""
    return {table: {k: list(v) if isinstance(v, tuple) else str(v) if k == "strategy" else v
                    for k, v in asdict(ts).items() if v is not None}
            for table, ts in strategies.items()}


def parse_table_strategies(data: object, base: str = "table_strategies"
                           ) -> tuple[dict[str, TableStrategy], list[ConfigError]]:
    """``table_strategies`` from plain JSON/YAML data (a sync policy), checked by the same
    rules as the agent's YAML; every error names its dotted field under ``base``."""
    if not isinstance(data, dict):
        return {}, [ConfigError(base, "must be a mapping of table name to strategy")]
    tables: dict[str, TableStrategy] = {}
    errors: list[ConfigError] = []
    for table, doc in data.items():
        if not isinstance(doc, dict):
            errors.append(ConfigError(f"{base}.{table}", "must be a mapping with a strategy "
                                                         "(rows, telemetry or ignore)"))
            continue
        loaded = read_table_strategy(doc, f"{base}.{table}", errors)
        if loaded is not None:
            tables[str(table)] = loaded
    strategies = check_table_strategies(tables, base, errors)
    return ({}, errors) if errors else (strategies, [])
