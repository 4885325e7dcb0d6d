"""The loopback bridge: inside the sandbox, TCP ports on 127.0.0.1 that lead to term2's proxy sockets.

Tools speak to proxies over TCP (``HTTP_PROXY=http://127.0.0.1:3128``), but the command's network
namespace has only its own loopback, and the proxy lives outside, on Unix sockets bound into the
sandbox. This program, run by the sandbox's own python3 (standard library only, old Pythons too),
listens on the ports first, then starts the command as its child and copies bytes between each
accepted connection and its Unix socket until the command exits, and exits with the command's
status. It is no part of the security boundary: the command could kill it or talk to the sockets
itself, and would still reach only what the proxy outside allows. Kept as a source string, passed
with ``-c``: nothing is written into the sandbox.
"""

from __future__ import annotations

import os

from term2.adapters.sandbox.environment import SANDBOX_PATH

HTTP_PORT = 3128
SOCKS_PORT = 1080
SOCKET_DIR = "/run/term2-network"  # inside the sandbox, on its private /run
HTTP_SOCKET = f"{SOCKET_DIR}/http.sock"
SOCKS_SOCKET = f"{SOCKET_DIR}/socks.sock"

BRIDGE = r"""
import os, signal, socket, sys, threading

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def carry(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client))
    back.daemon = True
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()

def serve(listener, path):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            continue
        worker = threading.Thread(target=carry, args=(client, path))
        worker.daemon = True
        worker.start()

args = sys.argv[1:]
split = args.index("--")
pairs, command = args[:split], args[split + 1:]
listeners = []
for i in range(0, len(pairs), 2):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(pairs[i])))
    listener.listen(128)
    listeners.append((listener, pairs[i + 1]))
child = os.fork()
if child == 0:
    for listener, _ in listeners:
        listener.close()
    os.execv(command[0], command)
for listener, path in listeners:
    thread = threading.Thread(target=serve, args=(listener, path))
    thread.daemon = True
    thread.start()
while True:
    try:
        _, status = os.waitpid(child, 0)
        break
    except InterruptedError:
        continue
sys.stdout.flush()
os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
"""


def find_python() -> str | None:
    """The python3 the sandbox's PATH finds, which the sandbox shows read-only at the same path."""
    for folder in SANDBOX_PATH.split(":"):
        candidate = os.path.join(folder, "python3")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def bridge_prefix(python: str) -> list[str]:
    """What runs the command: the bridge, its ports and sockets, then ``--`` and the command's argv."""
    return [python, "-I", "-S", "-c", BRIDGE, str(HTTP_PORT), HTTP_SOCKET, str(SOCKS_PORT), SOCKS_SOCKET, "--"]


def proxy_environment() -> dict[str, str]:
    """The variables that send the common tools through the bridge (ADR 0030 lists which tool reads which).

    NO_PROXY names only the sandbox's own loopback, which cannot leave the namespace: a test server
    the command starts stays reachable directly, and nothing else bypasses the proxy.
    """
    http = f"http://127.0.0.1:{HTTP_PORT}"
    socks = f"socks5h://127.0.0.1:{SOCKS_PORT}"
    loopback = "localhost,127.0.0.1,::1"
    env = {}
    for name, value in (("http_proxy", http), ("https_proxy", http), ("all_proxy", socks), ("no_proxy", loopback)):
        env[name] = value
        env[name.upper()] = value
    env.update(
        {
            "npm_config_proxy": http,  # npm reads these before its own .npmrc defaults
            "npm_config_https_proxy": http,
            "npm_config_noproxy": loopback,
            "YARN_HTTP_PROXY": http,  # yarn 2+ ignores the standard variables
            "YARN_HTTPS_PROXY": http,
            "NODE_USE_ENV_PROXY": "1",  # Node 24+'s own fetch/http honour the variables only when asked
            "CARGO_HTTP_PROXY": http,
            "PIP_PROXY": http,
        }
    )
    return env
