"""BubblewrapSandbox: the Sandbox port on Linux, confining commands with bwrap.

Design (ADR 0005): the workspace roots (the root and the session's additional
directories, ADR 0050) are the only writable host paths, each walked and
protected alike (``workspace_roots``, ``root_walks``); the host
filesystem is read-only; network, IPC, pid, uts and cgroup namespaces are
private; capabilities are dropped and nested user namespaces refused; a
seccomp deny-list closes the kernel surface; the environment is an allow-list.
A root agent never gives the sandbox host root for a workspace it does not
own: bwrap is started as the workspace owner. There is no unsandboxed
fallback: if the probe fails, ``run`` raises SandboxUnavailable.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace

import anyio

from term2.adapters.sandbox import seccomp
from term2.adapters.sandbox.cgroup import PidsCgroup
from term2.adapters.sandbox.environment import sandbox_environment
from term2.adapters.sandbox.footholds import (
    MaskMaterial,
    hidden_masks,
    host_sockets,
    plan_protection,
    remove_ghosts,
    secret_masks,
    socket_masks,
)
from term2.adapters.sandbox.invocation import (
    BWRAP,
    Identity,
    Limits,
    build_argv,
    identity_for,
)
from term2.adapters.sandbox.loopback_bridge import (
    HTTP_PORT,
    HTTP_SOCKET,
    SOCKS_SOCKET,
    bridge_prefix,
    find_python,
    proxy_environment,
)
from term2.adapters.sandbox.preflight import check_host
from term2.adapters.sandbox.process import SandboxProcess, finish, result_of
from term2.adapters.sandbox.root_walks import clean_up, scan_before
from term2.adapters.sandbox.spawner import spawn
from term2.adapters.sandbox.tree_watches import TreeWatches
from term2.adapters.sandbox.walk_watching import how_walks_are_kept
from term2.adapters.sandbox.workspace_roots import validated
from term2.domain.network import HostPattern, NetworkGrant
from term2.ports.network import Egress, EgressSession
from term2.ports.sandbox import (
    CommandRequest,
    CommandResult,
    OutputSink,
    SandboxFailed,
    SandboxStatus,
    SandboxUnavailable,
)
from term2.support.deferred_log import get_logger

_log = get_logger(__name__)

PROBE_TIMEOUT_S = 15.0
PROBE_UID = 65534  # "nobody": stands in for a workspace owner in the status probe


# Run in the sandbox by the network probe: ask the proxy, through the bridge, for a host not approved.
_NETWORK_PROBE = (
    f"import socket; s = socket.create_connection(('127.0.0.1', {HTTP_PORT})); "
    "s.sendall(b'CONNECT refused.invalid:443 HTTP/1.1\\r\\n\\r\\n'); print(s.recv(64).split(b' ')[1].decode())"
)


@dataclass(slots=True)
class _RootUse:
    active: int = 0
    ghosts: list[str] = field(default_factory=list)


class BubblewrapSandbox:
    """Run commands under ``/usr/bin/bwrap``; see the module docstring.

    ``bwrap`` exists for tests of the availability checks; it must be an
    absolute path and passes the same ownership checks. PATH is never searched.
    ``hidden`` are term2's own files and folders (session store, config): never
    visible to a command, wherever they live. ``egress`` runs the proxies of a command the user allowed
    some hosts (ADR 0030); without it such a command fails, it never gets the host's network.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        bwrap: str = BWRAP,
        hidden: Sequence[str] = (),
        egress: Egress | None = None,
    ) -> None:
        self._limits = limits or Limits()
        self._egress = egress
        self._bwrap = bwrap
        self._hidden = tuple(os.path.realpath(path) for path in hidden)
        self._host_sockets: list[str] | None = None  # found once per adapter: only root can add one
        self._available: SandboxStatus | None = None
        self._masks: MaskMaterial | None = None
        self._roots: dict[str, _RootUse] = {}
        self.trees = TreeWatches()  # the walks kept between commands, by root (ADR 0031)
        weakref.finalize(self, self.trees.close)

    # -- status -------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        """Check the host, then run the production argv with ``true``.

        As root, both production shapes are probed: a root-owned root, and one
        owned by an unprivileged uid (bwrap then starts through setpriv). Only
        the first decides availability; if the second fails (e.g. AppArmor
        refusing unprivileged user namespaces), the detail says that
        workspaces not owned by root will fail with SandboxFailed.
        A positive answer is cached for the adapter's life; a negative one is
        re-probed on every call (the host may be fixed without a restart).
        """
        if self._available is not None:
            return self._available
        problem = await check_host(self._bwrap)
        if problem is None:
            problem = await self._probe(owner=None)
        if problem is not None:
            return SandboxStatus(available=False, detail=problem)
        detail = f"bubblewrap at {self._bwrap}"
        if os.geteuid() == 0:
            dropped = await self._probe(owner=(PROBE_UID, PROBE_UID))
            if dropped is not None:
                detail += f"; workspaces not owned by root cannot be sandboxed: {dropped}"
        network = await self._probe_network() if self._egress is not None else None
        walks = await anyio.to_thread.run_sync(how_walks_are_kept)
        self._available = SandboxStatus(available=True, detail=detail, network=network, walks=walks)
        return self._available

    async def _probe_network(self) -> str:
        """A command with network, end to end: the bridge in the sandbox reaches the proxy, which refuses
        a host that was not approved. Nothing leaves the machine."""
        probe_root = tempfile.mkdtemp(prefix="term2-probe-", dir="/tmp")
        grant = NetworkGrant((HostPattern("approved.invalid"),))
        request = CommandRequest(
            command=f"python3 -I -c {shlex.quote(_NETWORK_PROBE)}",
            root=probe_root,
            cwd=probe_root,
            timeout_s=PROBE_TIMEOUT_S,
            network=grant,
        )
        try:
            result = await self._run(request, None)
        except SandboxFailed as exc:
            return f"unavailable: {exc}"
        finally:
            os.rmdir(probe_root)
        answer = result.output.decode(errors="replace").strip()
        if result.exit_code == 0 and answer == "403" and any("refused.invalid" in n for n in result.notices):
            return f"ok: term2's proxy answers through the sandbox's loopback bridge ({find_python()})"
        return f"unavailable: the probe through the proxy got {answer[-300:] or f'exit {result.exit_code}'!r}"

    async def _probe(self, owner: tuple[int, int] | None) -> str | None:
        probe_root = tempfile.mkdtemp(prefix="term2-probe-", dir="/tmp")
        try:
            if owner is not None:
                os.chmod(probe_root, 0o755)
                os.chown(probe_root, *owner)
            request = CommandRequest(command="true", root=probe_root, cwd=probe_root, timeout_s=PROBE_TIMEOUT_S)
            result = await self._run(request, None)
        except SandboxFailed as exc:
            return f"bwrap probe failed: {exc}"
        finally:
            os.rmdir(probe_root)
        if result.exit_code != 0:
            output = result.output.decode(errors="replace").strip()
            return f"bwrap probe failed: {output or f'exit {result.exit_code}'}"
        return None

    # -- run ----------------------------------------------------------------

    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        """Run ``request.command`` confined to ``request.root``.

        Output is capped at ``output_limit`` bytes; past it the tree is killed
        and ``truncated`` is set. No marker is appended: the bytes returned are
        exactly what the command wrote, and the caller renders the marker.
        ``exit_code`` is the shell's status (128+N when the command died of
        signal N); ``signal`` is SIGKILL only when the adapter itself killed
        the tree (timeout, or output flood before an exit status arrived).
        """
        status = await self.status()
        if not status.available:
            raise SandboxUnavailable(status.detail)
        return await self._run(request, on_output)

    async def _run(self, request: CommandRequest, on_output: OutputSink | None) -> CommandResult:
        """Every root of the request (the root, then its extra roots, ADR 0050) walked, protected, bound and
        cleaned up alike; the command starts in the root."""
        root, cwd, extras = validated(request, self._hidden)
        roots = (root, *extras)
        root_stat = os.stat(root)
        identity = identity_for(root_stat.st_uid, root_stat.st_gid)
        guard = request.guard_instructions
        limit = self._limits.scan_entries
        async with AsyncExitStack() as stack:
            uses = [await stack.enter_async_context(self._using(each)) for each in roots]
            befores = await anyio.to_thread.run_sync(scan_before, self.trees, roots, limit, identity.host_root)
            plans = [plan_protection(before, self._mask_material(), guard_instructions=guard) for before in befores]
            for use, plan in zip(uses, plans, strict=True):
                use.ghosts.extend(g for g in plan.ghosts if g not in use.ghosts)
            binds = [(each, plan.args) for each, plan in zip(roots, plans, strict=True)]
            notices: list[str] = []
            try:
                async with _pids_group(identity, self._limits) as pids:
                    result = await self._supervise(request, binds, cwd, identity, pids, on_output)
            finally:
                with anyio.CancelScope(shield=True):  # a cancelled command may have planted too
                    notices = await anyio.to_thread.run_sync(
                        clean_up, self.trees, befores, limit, identity.host_root, guard
                    )
            return replace(result, notices=result.notices + tuple(notices))

    async def _socket_masks(self) -> list[str]:
        if self._host_sockets is None:
            self._host_sockets = await anyio.to_thread.run_sync(host_sockets)
            if self._host_sockets:
                _log.info("sandbox.host_sockets_masked", paths=self._host_sockets[:20])
        return socket_masks(self._host_sockets, self._mask_material())

    async def _supervise(
        self,
        request: CommandRequest,
        binds: list[tuple[str, list[str]]],
        cwd: str,
        identity: Identity,
        pids: PidsCgroup | None,
        on_output: OutputSink | None,
    ) -> CommandResult:
        if request.network is None:
            return await self._start(request, binds, cwd, identity, pids, on_output, None)
        python = find_python()
        if self._egress is None or python is None:
            why = "no python3 on the sandbox's PATH for its loopback bridge" if python is None else "no proxy"
            raise SandboxFailed(f"network by approval is not available here ({why}); nothing ran")
        async with self._egress.session(request.network, owner=identity.drop_to) as net:
            result = await self._start(request, binds, cwd, identity, pids, on_output, (net, python))
            return replace(result, notices=result.notices + tuple(net.refusals))

    async def _start(
        self,
        request: CommandRequest,
        binds: list[tuple[str, list[str]]],
        cwd: str,
        identity: Identity,
        pids: PidsCgroup | None,
        on_output: OutputSink | None,
        network: tuple[EgressSession, str] | None,
    ) -> CommandResult:
        """``binds``: each root to bind writable with its protection, the root first."""
        root = binds[0][0]
        masks = self._mask_material()
        host_masks = (secret_masks(masks) if identity.host_root else []) + hidden_masks(self._hidden, masks)
        host_masks += await self._socket_masks()
        output_r, output_w = os.pipe()
        status_r, status_w = os.pipe()
        seccomp_fd = seccomp.open_filter_fd()
        argv = build_argv(
            bwrap=self._bwrap,
            limits=self._limits,
            identity=identity,
            roots=binds,
            cwd=cwd,
            command=request.command,
            status_fd=status_w,
            seccomp_fd=seccomp_fd,
            host_masks=host_masks,
            network=None if network is None else _network_args(*network),
        )
        if pids is not None:
            argv = pids.wrap(argv)
        env = sandbox_environment(root)
        if network is not None:
            env.update(proxy_environment())
        inherited: tuple[int, ...] = (status_w, seccomp_fd)
        if request.bridge_fd is not None:  # run_code's channel: the one extra fd, announced by number
            env["TERM2_BRIDGE_FD"] = str(request.bridge_fd)
            inherited += (request.bridge_fd,)
        try:
            proc = await spawn(
                argv,
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=output_w,
                stderr=output_w,
                close_fds=True,
                pass_fds=inherited,
                start_new_session=True,
            )
        except BaseException as exc:
            for fd in (output_r, status_r):
                os.close(fd)
            if isinstance(exc, OSError):
                raise SandboxFailed(f"could not start bwrap: {exc}") from exc
            raise
        finally:
            for fd in (output_w, status_w, seccomp_fd):
                os.close(fd)
        box = SandboxProcess(proc, output_r, status_r)
        timed_out = False
        try:
            with anyio.move_on_after(request.timeout_s) as deadline:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(box.pump_status)
                    await box.pump_output(request.output_limit, on_output)
                await box.wait()
            timed_out = deadline.cancelled_caught
        finally:
            with anyio.CancelScope(shield=True):
                await finish(box)
        return result_of(box, timed_out, identity)

    # -- helpers --------------------------------------------------------------

    def _mask_material(self) -> MaskMaterial:
        if self._masks is None:
            self._masks = MaskMaterial.create()
            weakref.finalize(self, self._masks.remove)
        return self._masks

    @asynccontextmanager
    async def _using(self, root: str) -> AsyncIterator[_RootUse]:
        """Count runs per root; remove the ghosts after the last one."""
        use = self._roots.setdefault(root, _RootUse())
        use.active += 1
        try:
            yield use
        finally:
            use.active -= 1
            if use.active == 0:
                remove_ghosts(use.ghosts)
                del self._roots[root]


def _network_args(net: EgressSession, python: str) -> tuple[list[str], list[str]]:
    """The two proxy sockets, and nothing of the folder around them, bound read-only into the private /run."""
    binds = ["--ro-bind", net.http_socket, HTTP_SOCKET, "--ro-bind", net.socks_socket, SOCKS_SOCKET]
    return binds, bridge_prefix(python)


@asynccontextmanager
async def _pids_group(identity: Identity, limits: Limits) -> AsyncIterator[PidsCgroup | None]:
    """Host root is exempt from RLIMIT_NPROC: bound its commands with a pids cgroup where one can be made."""
    pids = PidsCgroup.create(limits.processes) if identity.host_root else None
    try:
        yield pids
    finally:
        if pids is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pids.remove)
