"""The environment a sandboxed command sees, built from an allow-list.

Why at ``Popen(env=...)`` and not with ``--clearenv``/``--setenv``: bwrap's own
pid 1 keeps the environment it was started with (readable in /proc/1/environ),
and ``--setenv`` values show up in /proc/1/cmdline. Only an environment that
never reached bwrap is secret-free. Nothing from the agent's environment is
copied, so API keys and tokens cannot leak by a naming accident.
"""

from __future__ import annotations

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sandbox_environment(root: str) -> dict[str, str]:
    """The complete environment for bwrap and, through it, the command."""
    return {
        "PATH": SANDBOX_PATH,
        "HOME": root,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
