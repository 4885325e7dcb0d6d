"""The program side of the run_code bridge, run by the sandbox's own python3.

Kept as a source string (not imported by term2): it runs inside the sandbox,
under whatever python3 the host has, so it uses only the standard library and
stays compatible with old Pythons. It reads the model's program over the
bridge itself, so the program text never appears on a command line.
"""

from __future__ import annotations

import base64

PROGRAM_SIDE = r'''
import json, os, socket, sys

class ToolError(Exception):
    """A term2 tool call failed or was denied; the message says why."""

_sock = socket.socket(fileno=int(os.environ.pop("TERM2_BRIDGE_FD")))
_io = _sock.makefile("rwb")
_ids = iter(range(1, 1 << 62))

def call(tool, **arguments):
    """Call one term2 tool and return its text result; raise ToolError on failure or denial."""
    request = {"id": next(_ids), "tool": tool, "args": arguments}
    try:
        _io.write(json.dumps(request).encode() + b"\n")
        _io.flush()
        line = _io.readline()
    except OSError as exc:
        raise ToolError("the term2 bridge is closed: %s" % exc)
    if not line:
        raise ToolError("the term2 bridge is closed")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise ToolError(reply.get("error") or "tool call failed")
    return reply.get("result", "")

class _Tools:
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda **arguments: call(name, **arguments)

tools = _Tools()
_program = call("__program__")
_globals = {"__name__": "__main__", "tools": tools, "call": call, "ToolError": ToolError}
exec(compile(_program, "<run_code>", "exec"), _globals)
'''


def launcher_command() -> str:
    """A bash command line that runs the program side; the payload is base64 so no quoting can break it."""
    payload = base64.b64encode(PROGRAM_SIDE.encode()).decode("ascii")
    return f"exec python3 -I -c \"import base64;exec(base64.b64decode('{payload}'))\""
