"""Wire protocol shared by the device agent and the cloud worker."""

from edgesync.protocol._broker_rotation import (
    BrokerRotation,
    parse_broker_urls,
    rotation_of,
    split_urls,
)
from edgesync.protocol._broker_url import BrokerUrl, parse_broker_url
from edgesync.protocol._consuming import ConsumingClient, MqttMessage
from edgesync.protocol._control_kinds import ControlKind
from edgesync.protocol._loop import (
    Healthy,
    LoopState,
    LoopStatus,
    listen_loop,
    loop_state,
    periodic_loop,
    session_loop,
)
from edgesync.protocol._mqtt import TlsFiles, mqtt_client, tls_context
from edgesync.protocol._pipeline import Pipeline
from edgesync.protocol._publishing import PublishingClient
from edgesync.protocol._reconnect import Backoff, raise_if_cancelling
from edgesync.protocol._rejection import DECODER_CODES, RejectionCode
from edgesync.protocol._signing import canonical_control, sign_control, verify_control
from edgesync.protocol._snapshot_filter import (
    FilterOp,
    FilterTerm,
    KeyRange,
    SnapshotFilter,
    parse_filter,
)
from edgesync.protocol._status import (
    STATUS_REQUEST_KIND,
    AgentState,
    StatusReport,
    parse_status,
)
from edgesync.protocol._strategy_kind import StrategyKind
from edgesync.protocol._table_digest import (
    DIGEST_VERSION,
    MAX_PREFIX,
    TableDigest,
    differing_buckets,
    encode_value,
    pk_json,
)
from edgesync.protocol._table_strategies import (
    TableStrategy,
    check_table_strategies,
    parse_table_strategies,
    read_table_strategy,
    table_strategies_doc,
)
from edgesync.protocol._topics import (
    DEVICE_TO_CLOUD,
    TopicKind,
    TopicRef,
    parse_topic,
    topic_for,
    worker_subscriptions,
)
from edgesync.protocol._uuid7 import uuid7
from edgesync.protocol._wire_settings import (
    BUDGET_KEYS,
    Compression,
    parse_byte_budget,
    parse_compression,
)

__all__ = [
    "BUDGET_KEYS",
    "DECODER_CODES",
    "DEVICE_TO_CLOUD",
    "DIGEST_VERSION",
    "MAX_PREFIX",
    "STATUS_REQUEST_KIND",
    "AgentState",
    "Backoff",
    "BrokerRotation",
    "BrokerUrl",
    "Compression",
    "ConsumingClient",
    "ControlKind",
    "FilterOp",
    "FilterTerm",
    "Healthy",
    "KeyRange",
    "LoopState",
    "LoopStatus",
    "MqttMessage",
    "Pipeline",
    "PublishingClient",
    "RejectionCode",
    "SnapshotFilter",
    "StatusReport",
    "StrategyKind",
    "TableDigest",
    "TableStrategy",
    "TlsFiles",
    "TopicKind",
    "TopicRef",
    "canonical_control",
    "check_table_strategies",
    "differing_buckets",
    "encode_value",
    "listen_loop",
    "loop_state",
    "mqtt_client",
    "parse_broker_url",
    "parse_broker_urls",
    "parse_byte_budget",
    "parse_compression",
    "parse_filter",
    "parse_status",
    "parse_table_strategies",
    "parse_topic",
    "periodic_loop",
    "pk_json",
    "raise_if_cancelling",
    "read_table_strategy",
    "rotation_of",
    "session_loop",
    "sign_control",
    "split_urls",
    "table_strategies_doc",
    "tls_context",
    "topic_for",
    "uuid7",
    "verify_control",
    "worker_subscriptions",
]
