"""Fixtures the end-to-end modules share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fresh_home import Fresh, fresh_home


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Fresh]:
    """A new user's machine (HOME and nothing else of term2's) with its own fake model server; a module
    that needs the server configured otherwise overrides this fixture."""
    with fresh_home(tmp_path) as made:
        yield made
