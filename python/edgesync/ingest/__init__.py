"""Cloud ingest: topic routing, validation, dedupe, governance hand-off."""

from edgesync.ingest._consumer import MqttIngest
from edgesync.ingest._group import GroupWriter
from edgesync.ingest._objects import ObjectIngester
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._pipeline import IngestPipeline

__all__ = ["GroupWriter", "IngestOutcome", "IngestPipeline", "MqttIngest", "ObjectIngester",
           "OutcomeStatus"]
