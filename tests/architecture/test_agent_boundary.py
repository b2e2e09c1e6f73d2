"""The cloud imports nothing private of the agent: what both sides share (the wire words,
``table_strategies``) lives in ``edgesync.protocol``, and agent logic the cloud reuses
(discovery, to introspect a sample database) is public API of an agent package."""

from __future__ import annotations

from kits.import_graph import graph


def test_no_module_outside_the_agent_imports_a_private_agent_module() -> None:
    private = [f"{module}:{imp.line} imports {target}"
               for module, targets in graph().items() if not module.startswith("edgesync.agent")
               for target, imp in targets.items()
               if target.startswith("edgesync.agent.")
               and any(part.startswith("_") for part in target.split(".")[2:])]
    assert private == []
