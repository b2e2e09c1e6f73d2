"""The lines ``edgesync agent validate`` prints about a resolved configuration."""

from __future__ import annotations

from edgesync.agent.config._model import AgentConfig, ConnectionConfig

__all__ = ["summarize_config"]


def _brokers(c: ConnectionConfig) -> str:
    if not c.server_urls:
        return f"broker: {c.broker}"
    return "brokers (in turn): " + ", ".join(str(url) for url in c.brokers)


def summarize_config(cfg: AgentConfig) -> list[str]:
    """Human-readable lines describing a resolved config (secrets left out)."""
    c, rep = cfg.connection, cfg.replication
    lines = [
        f"{_brokers(c)} (device {c.device_id}, root topic {c.root_topic}, "
        f"keep-alive {c.keep_alive_s:g}s, clean_session {str(c.clean_session).lower()})",
        f"tls: ca={c.tls_ca_cert_path or '-'} cert={c.tls_client_cert_path or '-'} "
        f"key={c.tls_client_key_path or '-'}",
        f"source db: {rep.source_db_path}",
        f"state db: {rep.state_db_path}",
        f"flush every {rep.flush_interval_s:g}s; local retention {rep.local_retention_bytes} bytes"
        f"; telemetry look-back {rep.telemetry_lookback_s:g}s"
        f"; re-send unconfirmed batches after {rep.confirm_timeout_s:g}s"
        + (f"; backlogs over {rep.upload_backlog_rows} rows go by upload"
           if rep.upload_backlog_rows else ""),
        f"signed control: {'on' if cfg.security.signed_control else 'off'}",
        f"remote sync policy: {'applied' if rep.remote_policy else 'ignored (local YAML wins)'}",
    ]
    if rep.compression != "none":
        lines.append(f"batches on the wire: {rep.compression} frames")
    if c.max_bytes_per_second or c.max_bytes_per_day:
        lines.append(f"bandwidth budget: {c.max_bytes_per_second or 'unlimited'} bytes/s, "
                     f"{c.max_bytes_per_day or 'unlimited'} bytes per UTC day")
    for table, ts in sorted(rep.table_strategies.items()):
        lines.append(f"table {table}: {ts.strategy}"
                     + (f" (ts_column {ts.ts_column})" if ts.ts_column else "")
                     + (f" priority {ts.priority}" if ts.priority is not None else ""))
    lines.append("other tables: rows")
    return lines
