"""Cloud ingest: topic routing, validation, dedupe, governance hand-off, the write path, replay."""

from edgesync.ingest._amqp import AmqpIngest, check_amqp_url, check_amqp_urls
from edgesync.ingest._amqp_keys import amqp_binding_keys, routing_key_of, topic_candidates
from edgesync.ingest._consumer import MqttIngest
from edgesync.ingest._group import GroupWriter
from edgesync.ingest._objects import ObjectIngester
from edgesync.ingest._outcome import IngestOutcome, LedgerOutcome, OutcomeStatus
from edgesync.ingest._pipeline import IngestPipeline
from edgesync.ingest._replay import Replayer
from edgesync.ingest._trace import BatchTrace

__all__ = ["AmqpIngest", "BatchTrace", "GroupWriter", "IngestOutcome", "IngestPipeline",
           "LedgerOutcome", "MqttIngest", "ObjectIngester", "OutcomeStatus", "Replayer",
           "amqp_binding_keys", "check_amqp_url", "check_amqp_urls", "routing_key_of",
           "topic_candidates"]
