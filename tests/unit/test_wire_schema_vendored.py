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
SDK_DIR = REPO_ROOT / "conformance" / "node_modules" / "@agentclientprotocol" / "sdk"
PAIRS = {
    "v1": (VENDORED / "v1" / "schema.json", SDK_DIR / "schema" / "schema.json"),
    "v2": (VENDORED / "v2" / "schema.unstable.json", SDK_DIR / "schema" / "v2" / "schema.unstable.json"),
}


def _pinned_version() -> str:
    package = json.loads((REPO_ROOT / "conformance" / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"]["@agentclientprotocol/sdk"])


def test_readme_names_the_pinned_version() -> None:
    assert f"@agentclientprotocol/sdk@{_pinned_version()}" in (VENDORED / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("version", sorted(PAIRS))
def test_vendored_schema_is_byte_identical_to_the_npm_copy(version: str) -> None:
    vendored, installed = PAIRS[version]
    if not installed.exists():
        pytest.skip(f"{installed} is missing: run `npm ci --prefix conformance` (scripts/test always does)")
    installed_version = json.loads((SDK_DIR / "package.json").read_text(encoding="utf-8"))["version"]
    assert installed_version == _pinned_version(), "node_modules is stale: rerun `npm ci --prefix conformance`"
    assert vendored.read_bytes() == installed.read_bytes(), (
        f"{vendored.relative_to(REPO_ROOT)} differs from {installed.relative_to(REPO_ROOT)}: copy it again and "
        "run `uv run --frozen python scripts/gen_wire_types.py` (see the README beside it)"
    )
