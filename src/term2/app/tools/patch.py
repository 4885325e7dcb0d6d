"""apply_patch: the `*** Begin Patch` format GPT-5 and codex models are trained to write (ADR 0027).

One call may add, delete, rename and update several files, so every file it
touches is judged on its own, as edit_file's target would be: the workspace
rule, the approval question (one per file that needs it, in order), grants,
instruction files, git metadata, the depth limit, and ADR 0019's rule on what
old text reaches the model (an updated file is read to place its hunks, so
it is a read too). The call runs only when every file is allowed, and then
whole or not at all: every change is worked out before anything is written,
a hunk that cannot be placed (missing, or found in two places) stops the
patch, and a write that fails undoes the ones made before it. Hunks are
placed with edit_file's tolerance chain (domain/tolerant_match.py), each
below the one before it, as the format orders them. Working the changes out
is `patch_plan.py`; writing them, and undoing them, `patch_commit.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import anyio
import anyio.to_thread

from term2.app.tools import names
from term2.app.tools.anchored import open_regular, read_upto
from term2.app.tools.args import ArgumentError, Arguments, required_str
from term2.app.tools.base import Invocation, Outcome, Runner
from term2.app.tools.changes import may_read
from term2.app.tools.edit import Reviewed
from term2.app.tools.edit_texts import EDIT_LIMIT, Old, disk_old, old_text
from term2.app.tools.editor_turn import one_source
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import human_size
from term2.app.tools.patch_commit import PlannedChange, commit
from term2.app.tools.patch_plan import WHOLE, PatchTarget, plan
from term2.app.tools.paths import resolve_shown
from term2.app.tools.plants import git_plant_folder
from term2.domain.history import ToolKind, ToolOutput
from term2.domain.patch_grammar import AddFile, DeleteFile, FileOp, PatchError, UpdateFile, parse_patch
from term2.domain.roots import anchor, holding_root
from term2.domain.workspace import MAX_DEPTH, Access, too_deep
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

MAX_PATCH_FILES = 100  # files one patch may touch


@dataclass(frozen=True, slots=True)
class ApplyPatch:
    name: str = "apply_patch"
    kind: ToolKind = ToolKind.EDIT

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Add, delete, rename and update files with one patch, applied whole or not at all:\n"
                "*** Begin Patch\n"
                "*** Add File: <path>      (then each line of the new file as +line)\n"
                "*** Delete File: <path>\n"
                "*** Update File: <path>\n"
                "*** Move to: <path>       (optional, to rename it)\n"
                "@@ <a line above the change, e.g. def f():>   (or a bare @@)\n"
                " context line\n-removed line\n+added line\n"
                "*** End of File           (optional: the hunk ends the file)\n"
                "*** End Patch\n"
                "Give about 3 lines of context around each change, hunks in file order. Small slips in context "
                "(indentation, trailing spaces, tabs, quotes) are forgiven only when they leave exactly one place."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "input": {
                        "type": "string",
                        "description": "The whole patch, from *** Begin Patch to *** End Patch.",
                    },
                },
                "required": ["input"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        text = required_str(args, "input")
        if len(text) > EDIT_LIMIT:
            raise ArgumentError(f"the patch is {human_size(len(text))} long; the limit is {human_size(EDIT_LIMIT)}")
        try:
            ops = parse_patch(text)
        except PatchError as err:
            raise ArgumentError(f"the patch is malformed: {err}") from None
        if len(ops) > MAX_PATCH_FILES:
            raise ArgumentError(f"the patch touches {len(ops)} files; one call touches at most {MAX_PATCH_FILES}")
        targets = tuple(_target(op, root, extra_roots) for op in ops)
        root = _one_root(targets, root, extra_roots)
        seen: set[str] = set()
        for path in (p for t in targets for p in (t.path, t.dest) if p is not None):
            if path in seen:
                raise ArgumentError(
                    f"{names.shown(path)} appears twice in the patch; put all of a file's changes in one section"
                )
            seen.add(path)
        reviewed = Reviewed()
        runner = partial(_run, targets, root, reviewed)
        parts = tuple(part for t in targets for part in _parts(t, root, runner))
        count = len(seen)
        return Invocation(
            title=f"Apply patch to {names.shown(parts[0].target)}" if count == 1 else f"Apply patch to {count} files",
            access=Access.EDIT,
            target=parts[0].target,
            grant_folder=parts[0].grant_folder,
            locations=tuple(dict.fromkeys(place for part in parts for place in names.located(part.target))),
            run=runner,
            preview=partial(_preview, targets, root, reviewed),
            parts=parts,
        )


def _target(op: FileOp, root: str, extra_roots: tuple[str, ...]) -> PatchTarget:
    path = resolve_shown(root, op.path)
    path = _checked(path, anchor(path, root, extra_roots))
    dest = None
    if isinstance(op, UpdateFile) and op.move_to is not None:
        dest = resolve_shown(root, op.move_to)
        dest = _checked(dest, anchor(dest, root, extra_roots))
    return PatchTarget(op, path, dest)


def _one_root(targets: tuple[PatchTarget, ...], root: str, extra_roots: tuple[str, ...]) -> str:
    """The root every file of the patch is judged and written from: a patch changes one root at a time.

    Its files are worked out, written and undone as one, from one root's descriptor; across two roots each
    file would need its own, for a change nobody makes in one step (the model splits it, one call a root).
    """
    paths = [path for target in targets for path in (target.path, target.dest) if path is not None]
    held = {holding_root(path, (root, *extra_roots)) for path in paths} - {None}
    if len(held) > 1:
        raise ArgumentError(
            "the patch changes files in several workspace roots ("
            + ", ".join(names.shown(r) for r in sorted(r for r in held if r is not None))
            + "); send one apply_patch call per root"
        )
    return next((r for r in held if r is not None), root)


def _checked(path: str, root: str) -> str:
    if too_deep(path, root):
        name = names.shown(path)
        raise ArgumentError(
            f"{name} would sit {len(os.path.relpath(path, root).split('/')) - 1} folders deep in the workspace; "
            f"the sandbox walks at most {MAX_DEPTH - 1}, so term2 makes no deeper path"
        )
    return path


def _parts(target: PatchTarget, root: str, runner: Runner) -> tuple[Invocation, ...]:
    """One judged file per path, each as an edit (an edit grant covers placing hunks in it, ADR 0042).

    A moved file is judged as a read of its source too: its text lands under the new name, which read_file may
    read without asking, so moving it discloses it. An edit grant covers edits, not that (ADR 0042's amendment).
    """

    def part(path: str, verb: str, access: Access = Access.EDIT) -> Invocation:
        return Invocation(
            title=f"{verb} {names.shown(path)}",
            access=access,
            target=path,
            grant_folder=os.path.dirname(path),
            locations=names.located(path),
            run=runner,  # parts are judged, never run
            git_plant=git_plant_folder(path, root),
        )

    op = target.op
    if isinstance(op, AddFile):
        return (part(target.path, "Write"),)
    if isinstance(op, DeleteFile):
        return (part(target.path, "Delete"),)
    if target.dest is None:
        return (part(target.path, "Edit"),)
    return (part(target.path, "Edit"), part(target.path, "Read", Access.READ), part(target.dest, "Write"))


def _preview(targets: tuple[PatchTarget, ...], root: str, reviewed: Reviewed) -> tuple[ToolOutput, ...]:
    """Every file's diff, worked out from the disk as the run will (nothing when the patch would fail)."""
    try:
        olds = {path: disk_old(path, root) for t in targets for path in (t.path, t.dest) if path is not None}
        modes = {t.path: _mode(t.path, root) for t in targets if t.dest is not None and isinstance(olds[t.path], str)}
        changes = plan(targets, olds, modes, readable=dict.fromkeys(olds, False))
    except (ToolFailed, OSError, ValueError):
        reviewed.shown(None)
        return ()
    reviewed.shown(_key(changes))
    return tuple(change.content for change in changes)


def _key(changes: list[PlannedChange]) -> tuple[tuple[str, str | None], ...]:
    return tuple((change.path, change.new) for change in changes)


async def _run(
    targets: tuple[PatchTarget, ...], root: str, reviewed: Reviewed, ctx: ToolContext, call_id: str
) -> Outcome:
    paths = [path for target in targets for path in (target.path, target.dest) if path is not None]
    async with one_source(ctx, *dict.fromkeys(paths)) as ctx:  # read and written on one side (ADR 0038)
        return await _patch(targets, root, reviewed, ctx)


async def _patch(targets: tuple[PatchTarget, ...], root: str, reviewed: Reviewed, ctx: ToolContext) -> Outcome:
    olds: dict[str, Old] = {}
    for target in targets:
        for path in (target.path, target.dest):
            if path is not None:
                deleting = isinstance(target.op, DeleteFile)  # the editor cannot delete: the disk's file goes
                olds[path] = await (
                    anyio.to_thread.run_sync(partial(disk_old, path, root), abandon_on_cancel=True)
                    if deleting
                    else old_text(ctx, path, root)
                )
    readable = {path: may_read(ctx, path) for path in olds}
    modes = {}
    for target in targets:
        if target.dest is not None and isinstance(olds[target.path], str):
            modes[target.path] = await anyio.to_thread.run_sync(partial(_mode, target.path, root))
    # Working the patch out changes nothing: a cancel abandons it.
    changes = await anyio.to_thread.run_sync(
        partial(plan, targets, olds, modes, readable=readable), abandon_on_cancel=True
    )
    reviewed.check(", ".join(dict.fromkeys(change.path for change in changes)), _key(changes))
    priors = await anyio.to_thread.run_sync(partial(_priors, changes, root), abandon_on_cancel=True)
    with anyio.CancelScope(shield=True):  # from the first write on, the patch is made or undone, never half made
        await commit(ctx, root, changes, priors, olds)
    text = "".join(change.text for change in changes)
    locations = tuple(place for c in changes if c.new is not None for place in names.located(c.path, c.line))
    return Outcome(text, tuple(change.content for change in changes), locations=locations or None)


def _mode(path: str, root: str) -> int:
    fd = open_regular(path, root)
    try:
        return os.fstat(fd).st_mode & 0o7777
    finally:
        os.close(fd)


def _priors(changes: list[PlannedChange], root: str) -> list[bytes | None]:
    """What each touched file holds on the disk now, to put back if a later write fails."""
    priors: list[bytes | None] = []
    for change in changes:
        try:
            fd = open_regular(change.path, root)
        except FileNotFoundError:
            priors.append(None)
            continue
        try:
            data = read_upto(fd, EDIT_LIMIT + 1)
        finally:
            os.close(fd)
        if len(data) > EDIT_LIMIT:
            raise ToolFailed(f"{names.shown(change.path)} is too large to change with apply_patch; {WHOLE}")
        priors.append(data)
    return priors
