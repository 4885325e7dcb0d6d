"""How term2 uses the generated wire types: for mypy only, with complete value tables.

* No module imports them at run time, so neither `initialize` (answered before the
  server loads, ADR 0003) nor the session methods pay for them (ADR 0012).
* Version-neutral code (errors, envelopes, `$/cancel_request`) is typed with v1's
  definitions; that is sound only while v2 defines them identically.
* The tables mapping domain enums to wire literals cover every domain value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from term2.adapters.acp import approval_bridge, wire_common, wire_v1, wire_v2
from term2.domain.approval import OptionKind
from term2.domain.history import ToolKind, ToolStatus
from term2.domain.turn import StopReason

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "src" / "term2" / "adapters" / "acp" / "schema"
RUNTIME_MODULES = (
    "term2.app.entrypoints.launcher",
    "term2.app.entrypoints.serve",
    "term2.adapters.acp.negotiation",
    "term2.adapters.acp.stdio",
    "term2.adapters.acp.server",
    "term2.adapters.acp.session_methods",
    "term2.adapters.acp.wire_v1",
    "term2.adapters.acp.wire_v2",
)


def test_no_runtime_module_loads_the_wire_types() -> None:
    program = (
        "import importlib, sys\n"
        f"for name in {RUNTIME_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('term2.adapters.acp.wire_types')))\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def _shape(schema: object) -> object:
    """A definition without its prose (the doc links differ between versions)."""
    if isinstance(schema, dict):
        return {key: _shape(value) for key, value in schema.items() if key != "description"}
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    return schema


def test_version_neutral_definitions_are_identical_in_v1_and_v2() -> None:
    v1 = json.loads((SCHEMA_DIR / "v1" / "schema.json").read_text(encoding="utf-8"))["$defs"]
    v2 = json.loads((SCHEMA_DIR / "v2" / "schema.unstable.json").read_text(encoding="utf-8"))["$defs"]
    for name in ("Error", "ErrorCode", "RequestId", "CancelRequestNotification"):
        assert _shape(v1[name]) == _shape(v2[name]), name


def test_value_tables_cover_every_domain_value() -> None:
    assert set(wire_common.TOOL_KINDS) == set(ToolKind)
    assert set(wire_common.STOP_REASONS) == set(StopReason) - {StopReason.ERROR}  # v2 sends it as an extension
    assert set(wire_v1.STATUSES) == set(wire_v2.STATUSES) == set(ToolStatus)
    assert set(approval_bridge.OPTION_KINDS) == set(OptionKind)
    assert all(kind.value == wire for kind, wire in wire_common.TOOL_KINDS.items())
    assert all(reason.value == wire for reason, wire in wire_common.STOP_REASONS.items())
    assert all(status.value == wire for status, wire in wire_v2.STATUSES.items())
