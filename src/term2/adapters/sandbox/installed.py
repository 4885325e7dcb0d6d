"""Is bubblewrap installed? Asked once at start, so a new user learns which package to install before the
first command is refused (issue 31 item 6), not from a refusal mid-turn.

Standard library only: `term2 acp` asks before it answers `initialize`. Nothing here decides whether a
command runs: the sandbox's own checks (preflight.py) do that, and refuse every command without bwrap.
"""

from __future__ import annotations

import os
import sys

BWRAP = "/usr/bin/bwrap"  # the sandbox's fixed path: never one from PATH


def bubblewrap_missing(bwrap: str = BWRAP) -> str | None:
    """One line naming the package to install when bwrap is not an executable file, else None."""
    if not sys.platform.startswith("linux"):
        return None  # no package would help: `term2 doctor` says why commands cannot run here
    if os.path.isfile(bwrap) and os.access(bwrap, os.X_OK):
        return None
    return (
        f"term2: bubblewrap is not installed ({bwrap}), so every command will be refused: install the "
        "bubblewrap package (apt install bubblewrap, dnf install bubblewrap, pacman -S bubblewrap)\n"
    )
