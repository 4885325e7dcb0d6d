"""The ACP Registry manifest (`agent.json`, issue 31 item 6) against the registry's own schema, vendored in
tests/support (its source in registry_agent.schema.md), and the checks its build script adds to the schema:
the id's form, and a uvx package pinned to the manifest's version, which is the package's."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from term2 import __version__

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "support" / "registry_agent.schema.json"


def manifest() -> dict[str, Any]:
    return json.loads((ROOT / "agent.json").read_text())  # type: ignore[no-any-return]


def test_the_manifest_validates_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(manifest()), key=str)
    assert not errors, [e.message for e in errors]


def test_the_manifest_runs_this_version_over_acp_with_uvx() -> None:
    agent = manifest()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert agent["version"] == project["version"] == __version__
    assert agent["distribution"] == {"uvx": {"package": f"term2=={__version__}", "args": ["acp"]}}
    assert agent["license"] == project["license"]["text"]
    # build_registry.py: a lowercase id starting with a letter, no '@latest', the uvx pin equal to the version
    assert re.fullmatch(r"[a-z][a-z0-9-]*", agent["id"])
    assert re.search(r"[=@]+([\d.]+)", agent["distribution"]["uvx"]["package"]).group(1) == agent["version"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "broken",
    [
        {"distribution": {"uvx": {"args": ["acp"]}}},  # no package
        {"distribution": {"pip": {"package": "term2"}}},  # not a distribution the registry knows
        {"id": "Term2"},
    ],
)
def test_the_vendored_schema_still_refuses_what_the_registry_refuses(broken: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest() | broken, schema)
