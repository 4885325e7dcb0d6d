"""Results are sorted here in rg's own `--sort path` order, with a key that is one C call."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from term2.app.tools.search_walks import path_order

NAMES = [b"a", b"a.txt", b"a-b", b"a b", b"b", b"A", b"\xff", b"\x01", b"~"]
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(b"/".join)


@given(paths, paths)
def test_the_key_compares_name_by_name(one: bytes, other: bytes) -> None:
    assert (path_order(one) < path_order(other)) == (one.split(b"/") < other.split(b"/"))


def test_the_key_gives_rgs_sort_path_order(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    for first in NAMES:
        for second in (b"", *NAMES[:4]):
            path = os.path.join(root, first, second) if second else os.path.join(root, first + b".f")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.isdir(path):
                open(path, "wb").close()
    rg = os.path.join(sysconfig.get_path("scripts"), "rg")
    done = subprocess.run([rg, "--no-config", "--files", "--null", "--sort", "path"], cwd=root, capture_output=True)
    printed = done.stdout.split(b"\0")[:-1]
    assert len(printed) > 20
    assert sorted(printed, key=path_order) == printed
