"""The vendored ACP schemas are the pinned SDK's own files, byte for byte.

The generated wire types are only as good as the schema they come from; this
keeps the copy in the repository from drifting from what the SDK clients ship.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
VENDORED = REPO_ROOT / "src" / "term2" / "adapters" / "acp" / "schema"
MODULES = REPO_ROOT / "conformance" / "node_modules"
# v1 from 2.4.0 (npm alias `sdk24`, ADR 0043), the v2 draft from 1.4.0, which term2's v2 page binds.
PAIRS = {
    "v1": (VENDORED / "v1" / "schema.json", "sdk24", Path("schema") / "v1" / "schema.json"),
    "v2": (
        VENDORED / "v2" / "schema.unstable.json",
        "@agentclientprotocol/sdk",
        Path("schema/v2/schema.unstable.json"),
    ),
}


def _pinned_version(alias: str) -> str:
    package = json.loads((REPO_ROOT / "conformance" / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"][alias]).rpartition("@")[2]


def test_readme_names_the_pinned_versions() -> None:
    readme = (VENDORED / "README.md").read_text(encoding="utf-8")
    for alias in ("sdk24", "@agentclientprotocol/sdk"):
        assert f"@agentclientprotocol/sdk@{_pinned_version(alias)}" in readme


@pytest.mark.parametrize("version", sorted(PAIRS))
def test_vendored_schema_is_byte_identical_to_the_npm_copy(version: str) -> None:
    vendored, alias, inside = PAIRS[version]
    installed = MODULES / alias / inside
    if not installed.exists():
        pytest.skip(f"{installed} is missing: run `npm ci --prefix conformance` (scripts/test always does)")
    installed_version = json.loads((MODULES / alias / "package.json").read_text(encoding="utf-8"))["version"]
    assert installed_version == _pinned_version(alias), "node_modules is stale: rerun `npm ci --prefix conformance`"
    assert vendored.read_bytes() == installed.read_bytes(), (
        f"{vendored.relative_to(REPO_ROOT)} differs from {installed.relative_to(REPO_ROOT)}: copy it again and "
        "run `uv run --frozen python scripts/gen_wire_types.py` (see the README beside it)"
    )
