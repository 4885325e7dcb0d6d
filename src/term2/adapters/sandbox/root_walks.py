"""The walks around one command, for every workspace root it binds (ADR 0031, 0050).

Before the command, each root's kept walk finds what to mask and pin (its ``.env``
files, git metadata, instruction files); after it, the same walk finds what the
command planted or changed there. Every root bound writable is walked: one walked
less would be where a command plants a hook or reads a secret unseen.
"""

from __future__ import annotations

from collections.abc import Sequence

from term2.adapters.sandbox.footholds import strip_setid_bits
from term2.adapters.sandbox.tree_scan import (
    ScanIncomplete,
    TreeScan,
    instruction_notice,
    quarantine_instructions,
    quarantine_plants,
    refuse_incomplete,
    scan_after,
    shown_path,
)
from term2.adapters.sandbox.tree_watches import TreeWatches
from term2.ports.sandbox import SandboxFailed
from term2.support.deferred_log import get_logger

_log = get_logger(__name__)


def scan_before(trees: TreeWatches, roots: Sequence[str], limit: int, host_root: bool) -> list[TreeScan]:
    """Every root's walk before the command, each through its own kept walk (ADR 0031); one that cannot
    be completed refuses the whole run, for a command sees every root."""
    return [_scan_before(trees, root, limit, host_root) for root in roots]


def _scan_before(trees: TreeWatches, root: str, limit: int, host_root: bool) -> TreeScan:
    try:
        return trees.scan(root, limit=limit, setid=host_root)  # setid as after: one walk kept for both
    except ScanIncomplete as exc:
        raise refuse_incomplete(root, exc) from None
    except OSError as exc:
        raise SandboxFailed(f"refusing to run: the workspace {root} could not be checked: {exc}") from exc


def clean_up(trees: TreeWatches, befores: Sequence[TreeScan], limit: int, host_root: bool, guard: bool) -> list[str]:
    """After every run, every root's clean-up, in order; their notices together, those of an extra root
    (``befores[1:]``) led by its path, since each names paths relative to its own root."""
    notices: list[str] = []
    for index, before in enumerate(befores):
        found = _clean_up(trees, before.root, before, limit, host_root, guard)
        notices += [f"In the additional workspace root {shown_path(before.root)}: {n}" if index else n for n in found]
    return notices


def _clean_up(trees: TreeWatches, root: str, before: TreeScan, limit: int, host_root: bool, guard: bool) -> list[str]:
    """After every run: quarantine planted git metadata, report changed instruction files and, for
    host-root runs, strip setid bits.

    One walk serves all three. Setid stripping is only for runs mapped to host
    root: the seccomp filter already refuses to create those bits, and this is
    the backstop where a miss would be a setuid-root binary.
    """
    after = scan_after(root, limit, setid=host_root, walk=trees.scan)
    if isinstance(after, str):
        _log.warning("sandbox.unchecked", root=root, notice=after)
        return [after]
    changed = strip_setid_bits(after.setid_files)
    if changed:
        _log.warning("sandbox.setid_stripped", root=root, paths=changed[:20])
    notices = quarantine_plants(root, before, after)
    if guard:  # nobody was asked about this command: what it made of an instruction file is taken back
        notices += quarantine_instructions(root, before, after)
    for notice in notices:
        _log.warning("sandbox.quarantined", root=root, notice=notice)
    instructions = None if guard else instruction_notice(root, before, after)
    if instructions is not None:
        _log.warning("sandbox.instructions_changed", root=root, notice=instructions)
        notices.append(instructions)
    return notices
