"""Entry point: `term2` and `python -m term2`.

`term2 acp` takes a lean path (standard-library argument parsing, no rich)
because editors spawn it and wait for `initialize`; everything else goes
through the rich-click CLI.
"""

from __future__ import annotations

import gc
import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["acp"] and _ends_in_login(args):
        # A client's terminal auth method appends its args to the command it starts term2 with (ADR 0047)
        args = ["login"]
    if args[:1] == ["acp"] and not any(a in ("--help", "-h") for a in args[1:]):
        # Start-up only builds what the process keeps (modules, classes, the container): a collection now
        # would rescan it all, ~6% of the time to the first session. `serve` freezes it and collects again
        # once the session part is built (ADR 0052).
        gc.disable()
        from term2.app.entrypoints.keys import user_env
        from term2.app.entrypoints.launcher import launch_acp

        launch_acp(args[1:], user_env(os.environ))
        return
    from term2.app.entrypoints.cli import cli

    cli.main(args=args, prog_name="term2")


def _ends_in_login(args: list[str]) -> bool:
    """`term2 acp [flags] login`: `login` as a word of its own, not the value of --model/--provider/--effort."""
    return args[-1] == "login" and (len(args) < 3 or args[-2] not in ("--model", "--provider", "--effort"))


if __name__ == "__main__":
    main()
