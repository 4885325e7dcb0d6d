"""Threat suite: attacks a sandboxed command might try; every one must fail.

Each attack runs in both host modes (see conftest): a root-owned workspace
(sandbox uid = host root) and a user-owned one (the adapter drops to the
owner). Host-side targets belong to the workspace owner, so only the sandbox
stands between the attack and success. Numbers refer to the checklist in
sandbox-notes.md §3. Network attacks only target 127.0.0.1, sockets this test
creates, or non-routable documentation addresses.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from term2.adapters.sandbox import BubblewrapSandbox
from term2.adapters.sandbox.cgroup import PidsCgroup
from term2.ports.sandbox import CommandRequest, SandboxUnavailable
from tests.sandbox.commands import git_repo, py, text
from tests.support.procs import processes_with

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed: the threat suite needs the real sandbox", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

GUARD = 50  # seconds: a guard against a hang only, inside the 60 s pytest timeout so it says what hung


# --- filesystem writes (1-4) -------------------------------------------------------


async def test_write_outside_absolute(box: Box) -> None:
    etc_target = Path(f"/etc/term2-pwned-{box.tag}")
    try:
        result = await box.run(f"echo x > {box.outside}/abs; echo x > {etc_target}; echo x > /usr/term2-{box.tag}")
        assert not (box.outside / "abs").exists()
        assert not etc_target.exists()
        assert not Path(f"/usr/term2-{box.tag}").exists()
        assert result.exit_code != 0
    finally:
        etc_target.unlink(missing_ok=True)


async def test_write_outside_via_dotdot(box: Box) -> None:
    result = await box.run("echo x > ../outside/dotdot; echo x > ../../dotdot-" + box.tag)
    assert not (box.outside / "dotdot").exists()
    assert not (box.base.parent / f"dotdot-{box.tag}").exists()
    assert "../outside/dotdot" in text(result)  # the shell reported the refused write


async def test_write_outside_via_symlink_in_root(box: Box) -> None:
    planted = box.root / "planted"
    planted.symlink_to(box.outside)
    os.lchown(planted, *box.owner)
    result = await box.run(
        f"echo x > planted/pre; ln -s {box.outside} made && echo x > made/post; "
        f"ln -s /etc e; echo x > e/term2-{box.tag}"
    )
    assert not (box.outside / "pre").exists()
    assert not (box.outside / "post").exists()
    assert not Path(f"/etc/term2-{box.tag}").exists()
    assert result.exit_code != 0


async def test_write_outside_via_proc_1_root(box: Box) -> None:
    result = await box.run(f"echo x > /proc/1/root{box.outside}/p1; echo x > /proc/self/root{box.outside}/pself")
    assert not (box.outside / "p1").exists()
    assert not (box.outside / "pself").exists()
    assert result.exit_code != 0


# --- secrets and reads (8-10) ---------------------------------------------------------


async def test_read_etc_shadow(box: Box) -> None:
    result = await box.run(
        "cat /etc/shadow /etc/gshadow; ls /etc/ssh/ 2>/dev/null | grep _key$ | head -1 | xargs -r -I{} cat /etc/ssh/{}"
    )
    assert "root:" not in text(result)
    assert "PRIVATE KEY" not in text(result)


async def test_read_secret_in_home_outside_root(box: Box) -> None:
    # The agent's own 0600 secrets live in a HOME outside the workspace.
    home = Path(os.path.realpath("/tmp")) / f"term2-fake-home-{box.tag}"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_rsa"
    key.write_text(f"SECRET-{box.tag}")
    key.chmod(0o600)
    os.chown(key, *box.owner)  # readable by the sandbox's host uid: only hiding protects it
    try:
        result = await box.run(f"cat {key}; ls -A /root /home; cat ~/.ssh/id_rsa")
        assert f"SECRET-{box.tag}" not in text(result)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)


async def test_write_proc_sys(box: Box) -> None:
    result = await box.run(
        "v=$(cat /proc/sys/kernel/panic) && echo $v > /proc/sys/kernel/panic && echo SYSCTL_WRITTEN;"
        'p=$(cat /proc/sys/kernel/core_pattern) && echo "$p" > /proc/sys/kernel/core_pattern && echo CORE_WRITTEN'
    )
    assert "SYSCTL_WRITTEN" not in text(result)
    assert "CORE_WRITTEN" not in text(result)


async def test_read_dotenv(box: Box) -> None:
    box.write(box.root / ".env", f"OPENAI_API_KEY=sk-{box.tag}\n")
    box.make_dir(box.root / "svc")
    box.write(box.root / "svc" / ".env.local", f"TOKEN=tok-{box.tag}\n")
    result = await box.run("cat .env svc/.env.local; rm -f .env; mv svc/.env.local svc/stolen; cat svc/stolen")
    assert box.tag not in text(result)
    assert (box.root / ".env").read_text() == f"OPENAI_API_KEY=sk-{box.tag}\n"
    assert (box.root / "svc" / ".env.local").exists()


# --- persistence through the workspace (11-16) -------------------------------------------


async def test_plant_git_hook(box: Box) -> None:
    git = git_repo(box)
    result = await box.run(
        "echo 'touch /tmp/owned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; rm -rf .git/hooks"
    )
    assert not (git / "hooks" / "pre-commit").exists()
    assert (git / "hooks").is_dir()
    assert result.exit_code != 0


async def test_write_git_config(box: Box) -> None:
    git = git_repo(box)
    before = (git / "config").read_bytes()
    await box.run("git config core.fsmonitor 'touch /tmp/owned'; printf '[core]\\n\\tpager = evil\\n' >> .git/config")
    assert (git / "config").read_bytes() == before


async def test_rename_git_to_bypass_protection(box: Box) -> None:
    git = git_repo(box)
    result = await box.run(
        "mv .git .g && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; mv .git/hooks .git/h2"
    )
    assert not (box.root / ".g").exists()
    assert not (git / "hooks" / "pre-commit").exists()
    assert (git / "hooks").is_dir() and not (git / "h2").exists()
    assert "busy" in text(result).lower()


async def test_git_init_then_plant_hook(box: Box) -> None:
    result = await box.run("git init -q . ; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; echo done")
    assert "done" in text(result)
    assert not (box.root / ".git").exists(), "no repository (and no ghost mount point) may be left behind"


async def test_plant_setuid_binary(box: Box) -> None:
    if box.mode == "root-owned":
        # Stands for a route the seccomp filter missed: the post-run strip must catch it.
        box.write(box.root / "s0", "#!/bin/sh\n", mode=0o4755)
    result = await box.run(
        "cp /bin/sh s1 && chmod 4755 s1; cp /bin/sh s2 && chmod g+s s2; install -m 6755 /bin/sh s3;"
        + py("""
            import os
            os.close(os.open("s4", os.O_CREAT | os.O_WRONLY, 0o4755))  # no chmod: the mode at creation
        """)
    )
    for name in ("s0", "s1", "s2", "s3", "s4"):
        path = box.root / name
        if path.exists():
            assert not path.stat().st_mode & (stat.S_ISUID | stat.S_ISGID), (name, text(result))


async def test_mknod_device(box: Box) -> None:
    result = await box.run(
        "mknod mem c 1 1 && echo MADE; mknod null c 1 3 && echo MADE; cat /dev/vda 2>&1 | head -c 10"
    )
    assert "MADE" not in text(result)
    for name in ("mem", "null"):
        path = box.root / name
        assert not path.exists() or not stat.S_ISCHR(path.lstat().st_mode)


# --- privilege escalation and escape (17-22) ------------------------------------------


async def test_remount_root_read_write(box: Box) -> None:
    result = await box.run(
        "mount -o remount,rw / ; mount -o remount,bind,rw / ; umount -l /tmp; "
        f"echo x > /etc/term2-{box.tag} && echo WROTE"
    )
    try:
        assert "WROTE" not in text(result)
        assert not Path(f"/etc/term2-{box.tag}").exists()
    finally:
        Path(f"/etc/term2-{box.tag}").unlink(missing_ok=True)


async def test_mount_new_filesystem(box: Box) -> None:
    result = await box.run(f"mount -t tmpfs none {box.outside} && echo MOUNTED; mount --bind / mnt && echo MOUNTED")
    assert "MOUNTED" not in text(result)


async def test_nested_user_namespace(box: Box) -> None:
    result = await box.run(
        f"unshare -U -r -m sh -c 'mount -o remount,bind,rw / && echo x > {box.outside}/nested' && echo NESTED; "
        "unshare -U true && echo NESTED"
    )
    assert "NESTED" not in text(result)
    assert not (box.outside / "nested").exists()


async def test_ptrace_pid_1(box: Box) -> None:
    result = await box.run(
        py("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.ptrace(0x4206, 1, 0, 0)  # PTRACE_SEIZE bwrap's init
        print("ptrace", r, ctypes.get_errno())
        try:
            fd = os.open("/proc/1/mem", os.O_RDWR)
            print("MEM_OPEN")
        except OSError as e:
            print("mem", e.errno)
        buf = ctypes.create_string_buffer(8)
        r = libc.syscall(310, 1, 0, 0, 0, 0, 0)  # process_vm_readv
        print("vm", r, ctypes.get_errno())
    """)
    )
    out = text(result)
    assert "ptrace -1 1" in out, out  # EPERM from seccomp
    assert "MEM_OPEN" not in out
    assert "vm -1 1" in out


async def test_io_uring(box: Box) -> None:
    result = await box.run(
        py("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        print("uring", libc.syscall(425, 4, params), ctypes.get_errno())
    """)
    )
    assert "uring -1 1" in text(result), text(result)


async def test_keyctl(box: Box) -> None:
    result = await box.run(
        py("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print("keyctl", libc.syscall(250, 0, -3, 1), ctypes.get_errno())   # KEYCTL_GET_KEYRING_ID
        print("add_key", libc.syscall(248, b"user", b"k", b"v", 1, -3), ctypes.get_errno())
    """)
    )
    assert "keyctl -1 1" in text(result) and "add_key -1 1" in text(result), text(result)


async def test_tiocsti_injection(box: Box) -> None:
    # A pty the command controls: without the seccomp filter TIOCSTI succeeds here.
    result = await box.run(
        py("""
        import fcntl, os, pty, termios
        pid, master = pty.fork()
        if pid == 0:
            for request in (termios.TIOCSTI, termios.TIOCSTI | (1 << 32)):
                try:
                    fcntl.ioctl(0, request, b"x")
                    os.write(1, b"INJECTED\\n")
                except OSError as e:
                    os.write(1, f"blocked {e.errno}\\n".encode())
            os._exit(0)
        out = b""
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        print(out.decode())
        try:
            fd = os.open("/dev/tty", os.O_RDWR)
            fcntl.ioctl(fd, termios.TIOCSTI, b"x")
            print("TTY_INJECTED")
        except OSError as e:
            print("tty", e.errno)
    """)
    )
    out = text(result)
    assert "blocked 1" in out, out
    assert "INJECTED" not in out


# --- environment and fd leaks (23-25) ---------------------------------------------------


async def test_env_secrets(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-{box.tag}")
    monkeypatch.setenv("GITHUB_TOKEN", f"ghp-{box.tag}")
    monkeypatch.setenv("SSH_AUTH_SOCK", f"/tmp/agent-{box.tag}")
    result = await box.run(
        "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' ' ' < /proc/1/cmdline; tr '\\0' '\\n' < /proc/self/environ"
    )
    assert "PATH=" in text(result)  # the probe really printed an environment
    assert box.tag not in text(result)


async def test_leaked_file_descriptors(box: Box) -> None:
    leaked = os.open(box.outside, os.O_RDONLY | os.O_DIRECTORY)
    os.set_inheritable(leaked, True)  # as if some library forgot O_CLOEXEC
    try:
        result = await box.run(f"echo x > /proc/self/fd/{leaked}/escaped; ls -l /proc/self/fd")
    finally:
        os.close(leaked)
    assert not (box.outside / "escaped").exists()
    fds = [line.split()[-3] for line in text(result).splitlines() if " -> " in line]
    targets = [line.split(" -> ")[1] for line in text(result).splitlines() if " -> " in line]
    extra = [
        fd for fd, target in zip(fds, targets, strict=True) if fd not in {"0", "1", "2"} and not target.endswith("/fd")
    ]
    assert fds[:3] == ["0", "1", "2"] and not extra, text(result)


# --- IPC and network (26-29) ---------------------------------------------------------------


@pytest.fixture
def tcp_server() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


async def test_reach_host_loopback(box: Box, tcp_server: socket.socket) -> None:
    port = tcp_server.getsockname()[1]
    result = await box.run(
        f"timeout 3 bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED;"
        f"curl -s -m 2 http://127.0.0.1:{port}/ && echo CONNECTED"
    )
    assert "CONNECTED" not in text(result)
    assert not _accepted(tcp_server)


async def test_external_egress(box: Box) -> None:
    # 192.0.2.1 is TEST-NET-1: never a real host. Inside, only "lo" may exist.
    result = await box.run(
        "timeout 3 bash -c 'echo > /dev/tcp/192.0.2.1/80' && echo CONNECTED; "
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1"
    )
    out = text(result)
    assert "CONNECTED" not in out
    assert "unreachable" in out.lower()
    interfaces = {line.strip() for line in out.splitlines() if line.strip() and " " not in line.strip()}
    assert interfaces <= {"lo"}, out


async def test_dns_exfiltration(box: Box) -> None:
    resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    resolver.bind(("127.0.0.1", 0))
    resolver.setblocking(False)
    port = resolver.getsockname()[1]
    try:
        result = await box.run(
            py(f"""
            import socket
            header = bytes.fromhex("abcd01000001000000000000")
            query = header + b"\\x06secret\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01"
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.sendto(query, ("127.0.0.1", {port}))
                print("sent")
            except OSError as e:
                print("send failed", e)
        """)
            + "getent hosts example.com && echo RESOLVED"
        )
        time.sleep(0.2)
        try:
            received = resolver.recv(512)
        except BlockingIOError:
            received = b""
    finally:
        resolver.close()
    assert received == b""
    assert "RESOLVED" not in text(result)


async def test_abstract_unix_socket(box: Box) -> None:
    name = f"\0term2-test-{box.tag}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(4)
    server.setblocking(False)
    try:
        result = await box.run(
            py(f"""
            import socket
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect({name!r}); print("CONNECTED")
            except OSError as e:
                print("refused", e)
        """)
        )
        assert "CONNECTED" not in text(result) and "refused" in text(result)
        assert not _accepted(server)
    finally:
        server.close()


# --- devices, resources, lifecycle (32-38) ---------------------------------------------------


async def _none_left(marker: str) -> None:
    """Until no process holds `marker`: killed ones leave the table as the kernel gets to them (a busy
    machine may take a while); one that escaped would live its whole sleep, past the guard."""
    with anyio.fail_after(GUARD):
        while processes_with(marker):
            await anyio.sleep(0.05)


async def test_background_processes_do_not_survive(box: Box) -> None:
    marker = f"1000.{int(box.tag[:6], 16)}"  # a sleep length nothing else uses
    result = await box.run(
        f"nohup sleep {marker} >/dev/null 2>&1 & setsid sleep {marker} >/dev/null 2>&1 & "
        f"(sleep {marker} >/dev/null 2>&1 &); sleep 0.2; echo started"
    )
    assert "started" in text(result)
    await _none_left(marker)


async def test_timeout_kills_the_whole_tree(box: Box) -> None:
    marker = f"2000.{int(box.tag[:6], 16)}"
    result = await box.run(f"(sleep {marker} &); setsid sleep {marker} & sleep {marker}", timeout_s=1)
    assert result.timed_out  # the sleeps last 2,000 s: the timeout ended the command
    await _none_left(marker)


async def test_no_process_of_a_timed_out_command_runs_once_the_run_returns(box: Box) -> None:
    """Not eventually: at once. What follows a run (the root's folder lock released, ADR 0038; the
    post-run walk) relies on it, so the run waits for the namespace's init to exit, whose exit the
    kernel reports only after every process in the namespace is gone. Busy loops, not sleeps: a
    process that keeps running is what a killed bwrap alone would leave for a moment."""
    marker = f"3000.{int(box.tag[:6], 16)}"
    loop = f"while :; do :; done # {marker}"
    result = await box.run(f"setsid sh -c '{loop}' & (sh -c '{loop}' &); sh -c '{loop}'", timeout_s=1)
    assert result.timed_out
    assert processes_with(marker) == []


async def test_fork_bomb_is_bounded(box: Box) -> None:
    marker = f"forkbomb-{box.tag}"
    attempts = box.nproc_limit + 136
    result = await box.run(
        py(f"""
            import os, sys, time
            made = 0
            for _ in range({attempts}):
                try:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
                    made += 1
                except OSError:
                    break
            print("forks", made, flush=True)
            time.sleep(30)
        """).replace("python3 -", f"python3 - {marker}"),
        timeout_s=3,
    )
    assert result.timed_out  # every fork sleeps 30 s: the timeout ended the command
    await _none_left(marker)
    made = int(text(result).split("forks")[1].split()[0])
    if box.mode == "root-owned" and not _pids_cgroups_work():
        pytest.xfail("RLIMIT_NPROC does not bind host uid 0 and no pids cgroup can be made here")
    assert made < attempts, text(result)


def _pids_cgroups_work() -> bool:
    group = PidsCgroup.create(1)
    if group is None:
        return False
    group.remove()
    return True


async def test_memory_flood(box: Box) -> None:
    result = await box.run(
        py("""
            try:
                bytearray(8 << 30)
                print("BIG_ALLOCATED")
            except MemoryError:
                print("big refused")
            hog = []
            try:
                while True:
                    hog.append(b"x" * (64 << 20))
            except MemoryError:
                print("flood refused at", len(hog) * 64, "MiB")
        """),
        timeout_s=20,
    )
    out = text(result)
    assert "BIG_ALLOCATED" not in out and "big refused" in out
    assert "flood refused" in out, out
    assert int(out.split("refused at")[1].split()[0]) <= 1024


async def test_output_flood_is_capped_promptly(box: Box) -> None:
    result = await box.run("cat /dev/zero", output_limit=64 * 1024, timeout_s=20)
    # `cat /dev/zero` never ends: not timed out means the cap ended it, at once and not after 20 s.
    assert result.truncated and len(result.output) == 64 * 1024 and not result.timed_out


async def test_disk_flood(box: Box) -> None:
    result = await box.run("head -c 64M /dev/zero > big; echo rc=$?; head -c 64M /dev/zero > /tmp/big; echo tmp=$?")
    assert (box.root / "big").stat().st_size <= 16 << 20
    assert "rc=0" not in text(result) and "tmp=0" not in text(result), text(result)


async def test_fake_bwrap_first_on_path(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dir = box.base / "hijack"
    fake_dir.mkdir()
    marker = box.base / "hijacked"
    fake = fake_dir / "bwrap"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_dir}:{os.environ['PATH']}")
    monkeypatch.chdir(fake_dir)
    sandbox = BubblewrapSandbox()  # fresh: its probe also runs under the hijacked PATH
    status = await sandbox.status()
    result = await sandbox.run(CommandRequest(command="echo ran inside", root=str(box.root), cwd=str(box.root)))
    assert status.available
    assert not marker.exists()
    assert text(result) == "ran inside\n"


# --- fail-closed: the sandbox refuses to run rather than run unconfined (40) ------------------


async def _refused(bwrap: str) -> str:
    sandbox = BubblewrapSandbox(bwrap=bwrap)
    status = await sandbox.status()
    assert not status.available
    with pytest.raises(SandboxUnavailable):
        await sandbox.run(CommandRequest(command="true", root="/tmp", cwd="/tmp"))
    return status.detail


@pytest.fixture
def bwrap_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "bwrap"
    shutil.copy2("/usr/bin/bwrap", copy)
    return copy


async def test_missing_bwrap_is_unavailable(tmp_path: Path) -> None:
    assert "not installed" in await _refused(str(tmp_path / "bwrap"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a root-owned copy of bwrap needs root")
async def test_group_writable_bwrap_is_refused(bwrap_copy: Path) -> None:
    bwrap_copy.chmod(0o775)
    assert "writable by group or others" in await _refused(str(bwrap_copy))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
async def test_bwrap_not_owned_by_root_is_refused(bwrap_copy: Path) -> None:
    os.chown(bwrap_copy, 65534, 65534)
    assert "not root" in await _refused(str(bwrap_copy))


@pytest.mark.skipif(os.geteuid() != 0, reason="a root-owned fake bwrap needs root")
async def test_old_bwrap_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "bwrap"
    old.write_text("#!/bin/sh\necho bubblewrap 0.7.0\n")
    old.chmod(0o755)
    assert "too old" in await _refused(str(old))


def test_user_namespaces_refused_is_unavailable() -> None:
    # Run the status probe inside an outer bwrap that forbids creating user namespaces.
    code = (
        "import anyio\n"
        "from term2.adapters.sandbox import BubblewrapSandbox\n"
        "print(anyio.run(BubblewrapSandbox().status))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    outer = ["/usr/bin/bwrap", "--dev-bind", "/", "/", "--unshare-user", "--disable-userns", "--"]
    done = subprocess.run([*outer, sys.executable, "-c", code], env=env, capture_output=True, timeout=30)
    if b"bwrap: execvp" in done.stderr:
        pytest.skip(f"this interpreter cannot be started inside the outer bwrap: {done.stderr!r}")
    assert "available=False" in done.stdout.decode(), done.stdout + done.stderr
    assert "namespace" in done.stdout.decode()
