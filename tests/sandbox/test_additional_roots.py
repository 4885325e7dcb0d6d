"""A session's additional roots (ACP additionalDirectories) in the real sandbox (ADR 0050).

Each extra root is bound writable at its real path with every protection the
root has: its `.env` files masked, its git metadata read-only and plants in it
quarantined, its instruction files reported (or, in `auto`, pinned and
quarantined), its own walk kept between commands. The folder between the
roots stays as the host view shows it: nothing of it but the two mount points.
Every test also reads an ordinary file of the extra root, so that a sandbox
that did not bind the extra root at all cannot pass by hiding it.

Both host modes of the threat suite run (see conftest): a root-owned workspace
mapped to host root, and one of an unprivileged owner the adapter drops to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from term2.adapters.sandbox import BubblewrapSandbox
from term2.adapters.sandbox.tree_scan import QUARANTINE_SUFFIX
from term2.ports.sandbox import CommandRequest, CommandResult, SandboxFailed
from tests.sandbox.commands import text
from tests.sandbox.conftest import Box

pytestmark = pytest.mark.anyio


@pytest.fixture
def extra(box: Box) -> Path:
    """The second root, beside the workspace (and its "outside" sibling) under one parent, with an
    ordinary file to prove it is visible."""
    folder = box.make_dir(box.base / "more")
    box.write(folder / "plain.txt", f"plain-{box.tag}\n")
    return folder


async def run(box: Box, extra: Path, command: str, *, guard: bool = False, cwd: Path | None = None) -> CommandResult:
    request = CommandRequest(
        command=command,
        root=str(box.root),
        cwd=str(cwd or box.root),
        timeout_s=30.0,
        extra_roots=(str(extra),),
        guard_instructions=guard,
    )
    return await box.sandbox.run(request)


def visible(box: Box, result: CommandResult) -> None:
    assert f"plain-{box.tag}" in text(result), text(result)


async def test_a_command_writes_in_the_extra_root_and_it_lands_on_the_host(box: Box, extra: Path) -> None:
    result = await run(box, extra, f"cat {extra}/plain.txt; echo made-{box.tag} > {extra}/made.txt; mkdir {extra}/d")
    visible(box, result)
    assert result.exit_code == 0, text(result)
    assert (extra / "made.txt").read_text() == f"made-{box.tag}\n"
    assert (extra / "d").is_dir() and os.stat(extra / "made.txt").st_uid == box.owner[0]


async def test_the_command_starts_in_the_root_and_may_cd_into_the_extra_root(box: Box, extra: Path) -> None:
    result = await run(box, extra, f"pwd; cd {extra} && cat plain.txt && echo rel > rel.txt")
    assert result.exit_code == 0 and text(result).splitlines()[0] == str(box.root)
    visible(box, result)
    assert (extra / "rel.txt").read_text() == "rel\n"


async def test_a_cwd_in_the_extra_root_is_refused(box: Box, extra: Path) -> None:
    """The command's folder stays inside `root` (the folder the caller judged): nothing ran."""
    with pytest.raises(SandboxFailed, match="outside the workspace root"):
        await run(box, extra, f"touch {extra}/ran", cwd=extra)
    assert not (extra / "ran").exists()


async def test_the_extra_roots_env_files_are_masked_top_level_and_nested(box: Box, extra: Path) -> None:
    box.write(extra / ".env", f"TOP_SECRET={box.tag}\n")
    box.make_dir(extra / "svc" / "deep")
    box.write(extra / "svc" / "deep" / ".env.local", f"DEEP_SECRET={box.tag}\n")
    command = (
        f"cat {extra}/plain.txt; cat {extra}/.env; cat {extra}/svc/deep/.env.local; "
        f"cp {extra}/.env /tmp/x; cat /tmp/x; echo overwrite > {extra}/.env"
    )
    result = await run(box, extra, command)
    visible(box, result)
    assert "SECRET" not in text(result), text(result)
    assert (extra / ".env").read_text() == f"TOP_SECRET={box.tag}\n"  # the mask is read-only too


async def test_the_extra_roots_git_metadata_is_read_only(box: Box, extra: Path) -> None:
    subprocess.run(["git", "init", "-q", str(extra)], check=True)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(extra)], check=True)
    hook = extra / ".git" / "hooks" / "post-checkout"
    command = (
        f"cat {extra}/plain.txt; printf '#!/bin/sh\\ntouch {box.outside}/pwned\\n' > {hook}; chmod +x {hook}; "
        f"git -C {extra} config core.fsmonitor 'touch {box.outside}/pwned'; mv {extra}/.git {extra}/moved; "
        f"git -C {extra} status --short >/dev/null && echo status-ok"
    )
    result = await run(box, extra, command)
    visible(box, result)
    assert "status-ok" in text(result), text(result)  # reading the repository still works
    assert not hook.exists() and (extra / ".git" / "HEAD").is_file() and not (extra / "moved").exists()
    assert "fsmonitor" not in (extra / ".git" / "config").read_text()


async def test_a_repository_planted_in_the_extra_root_is_quarantined_with_a_notice(box: Box, extra: Path) -> None:
    result = await run(box, extra, f"cat {extra}/plain.txt; git init -q {extra}/planted && echo made")
    visible(box, result)
    assert "made" in text(result), text(result)
    assert not (extra / "planted" / ".git").exists()
    assert (extra / "planted" / (".git" + QUARANTINE_SUFFIX)).is_dir()
    notices = [n for n in result.notices if "quarantined planted/.git" in n]
    assert len(notices) == 1 and str(extra) in notices[0], result.notices


async def test_an_extra_root_without_a_repository_cannot_be_made_one(box: Box, extra: Path) -> None:
    """As for the root: `.git` and `HEAD` at the extra root's top are covered, so it never becomes one."""
    result = await run(box, extra, f"cat {extra}/plain.txt; git init -q {extra}; echo ref > {extra}/HEAD")
    visible(box, result)
    assert not (extra / ".git").exists() and not (extra / "HEAD").exists()  # the ghosts went after the run


async def test_an_instruction_file_an_unasked_command_writes_in_the_extra_root_is_quarantined(
    box: Box, extra: Path
) -> None:
    box.write(extra / "AGENTS.md", "the user's own\n")
    command = (
        f"cat {extra}/plain.txt; echo evil >> {extra}/AGENTS.md; mkdir {extra}/sub && echo evil > {extra}/sub/CLAUDE.md"
    )
    result = await run(box, extra, command, guard=True)
    visible(box, result)
    assert (extra / "AGENTS.md").read_text() == "the user's own\n"  # pinned: the append failed
    assert not (extra / "sub" / "CLAUDE.md").exists()
    assert (extra / "sub" / ("CLAUDE.md" + QUARANTINE_SUFFIX)).read_text() == "evil\n"
    notices = [n for n in result.notices if "quarantined project instruction files" in n]
    assert len(notices) == 1 and str(extra) in notices[0] and "sub/CLAUDE.md" in notices[0], result.notices


async def test_an_instruction_file_an_allowed_command_writes_in_the_extra_root_is_reported(
    box: Box, extra: Path
) -> None:
    result = await run(box, extra, f"cat {extra}/plain.txt; echo asked-for > {extra}/AGENTS.md")
    visible(box, result)
    assert (extra / "AGENTS.md").read_text() == "asked-for\n"
    notices = [n for n in result.notices if "changed project instruction files" in n]
    assert len(notices) == 1 and "created AGENTS.md" in notices[0] and str(extra) in notices[0], result.notices


async def test_the_folder_between_the_roots_is_neither_writable_nor_shown(box: Box, extra: Path) -> None:
    """The common parent holds the workspace, the extra root, "outside" and a file: inside the sandbox it
    holds only the two mount points, and nothing can be made in it."""
    box.write(box.base / f"beside-{box.tag}.txt", f"beside-{box.tag}\n")
    command = f"cat {extra}/plain.txt; ls -a {box.base}; cat {box.base}/beside-{box.tag}.txt; touch {box.base}/new"
    result = await run(box, extra, command)
    visible(box, result)
    listed = set(text(result).splitlines())
    assert {"ws", "more"} <= listed and not listed & {"outside", f"beside-{box.tag}.txt"}, text(result)
    assert f"beside-{box.tag}\n" not in text(result).replace(f"beside-{box.tag}.txt", "")
    assert not (box.base / "new").exists()


@pytest.mark.parametrize(
    "kind", ["same", "inside", "holding", "/", "/tmp", "home", "non-canonical", "missing", "owner"]
)
async def test_a_bad_extra_root_is_refused_before_anything_runs(box: Box, extra: Path, kind: str) -> None:
    """Judged as the root is, refused with SandboxFailed: the marker command never made its file."""
    if kind == "inside":
        path = str(box.make_dir(box.root / "sub"))
    elif kind == "non-canonical":
        os.symlink(extra, box.base / "link")
        path = str(box.base / "link")
    elif kind == "owner":
        other = 65534 if box.owner[0] == 0 else 0
        os.chown(extra, other, other)
        path = str(extra)
    else:
        path = {
            "same": str(box.root),
            "holding": str(box.base),
            "home": os.path.realpath(os.path.expanduser("~")),
            "missing": str(extra / "gone"),
        }.get(kind, kind)
    request = CommandRequest(
        command=f"touch {box.root}/ran {extra}/ran", root=str(box.root), cwd=str(box.root), extra_roots=(path,)
    )
    with pytest.raises(SandboxFailed):
        await box.sandbox.run(request)
    assert not (box.root / "ran").exists() and not (extra / "ran").exists()


async def test_the_extra_root_keeps_its_own_walk_and_sees_the_last_commands_changes(box: Box, extra: Path) -> None:
    """A `.env` command 1 makes in the extra root is masked in command 2: the extra root's kept walk saw it.
    Its walk is its own (before and after each command), and command 2's walks listed again only what the
    kernel said changed, not the extra root's every folder."""
    for n in range(40):
        box.make_dir(extra / f"pkg{n}" / "src")
    first = await run(box, extra, f"cat {extra}/plain.txt; echo SECRET-{box.tag} > {extra}/pkg7/src/.env")
    visible(box, first)
    second = await run(box, extra, f"cat {extra}/plain.txt; cat {extra}/pkg7/src/.env")
    visible(box, second)
    assert f"SECRET-{box.tag}" not in text(second), text(second)
    tree = box.sandbox.trees.tree(str(extra))
    assert len(tree.history) == 4  # its own walk: before and after each of the two commands
    if tree.watcher is not None:  # kept: only the folder command 1 changed is listed again
        assert tree.history[0] >= 81 and max(list(tree.history)[1:]) < 10, list(tree.history)


async def test_an_extra_root_under_a_private_folder_is_bound_after_its_tmpfs(box: Box) -> None:
    """/tmp is a private tmpfs in the sandbox: an extra root there is still the host's folder, as the root is."""
    folder = Path(tempfile.mkdtemp(prefix="term2-extra-", dir="/tmp")).resolve()
    try:
        folder.chmod(0o755)
        box.own(folder)
        box.write(folder / "plain.txt", f"plain-{box.tag}\n")
        box.write(folder / ".env", f"TMP_SECRET={box.tag}\n")
        result = await run(box, folder, f"cat {folder}/plain.txt {folder}/.env; echo made > {folder}/made.txt")
        visible(box, result)
        assert "TMP_SECRET" not in text(result) and (folder / "made.txt").read_text() == "made\n", text(result)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_an_extra_root_too_big_to_walk_refuses_the_command(box: Box, extra: Path) -> None:
    """A walk of any root that cannot complete refuses the run, as the root's does: nothing ran."""
    for n in range(30):
        box.make_dir(extra / f"d{n}")
    sandbox = BubblewrapSandbox(limits=replace(box.limits, scan_entries=20))
    request = CommandRequest(
        command=f"touch {box.root}/ran {extra}/ran", root=str(box.root), cwd=str(box.root), extra_roots=(str(extra),)
    )
    with pytest.raises(SandboxFailed, match=str(extra)):
        await sandbox.run(request)
    assert not (box.root / "ran").exists() and not (extra / "ran").exists()
