"""Capture: which tables replicate, the journal and its triggers, the telemetry cursor,
and the batches read from them."""
