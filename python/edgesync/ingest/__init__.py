"""Cloud ingest: topic routing, validation, dedupe, governance hand-off."""

from edgesync.ingest._consumer import MqttIngest
from edgesync.ingest._objects import ObjectIngester
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.ingest._pipeline import IngestPipeline

__all__ = ["IngestOutcome", "IngestPipeline", "MqttIngest", "ObjectIngester", "OutcomeStatus"]
