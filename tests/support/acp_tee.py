"""A transparent stdio relay that records an ACP conversation line by line.

Put it between any ACP client and an agent command::

    python -m tests.support.acp_tee --transcript-dir DIR -- python -m term2 acp

The relay spawns the agent with pipes, copies the client's stdin to the agent
and the agent's stdout back, byte for byte, and appends every line to a
transcript in the format :func:`tests.support.schemas.iter_transcript` reads:
``{"dir": "client" | "agent", "line": "<raw line>", "t": <unix time>}``. A client line is
recorded *before* it is forwarded, so a request always precedes its answer in
the transcript. The agent's stderr is inherited.

Each relay process (one agent process = one ACP connection, with its own
request ids) writes its own file ``DIR/<ns-timestamp>-<pid>.jsonl``, because a
client such as acpx may start the agent several times. ``--transcript FILE``
names the file instead. The relay exits with the agent's exit status and
forwards SIGTERM/SIGINT/SIGHUP to it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, BinaryIO


class Transcript:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, direction: str, raw: bytes) -> None:
        line = raw.rstrip(b"\n").removesuffix(b"\r").decode("utf-8", errors="replace")
        entry = json.dumps({"dir": direction, "line": line, "t": round(time.time(), 3)}, ensure_ascii=False)
        with self._lock:
            self._file.write(entry + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _pump(source: BinaryIO, sink: IO[bytes], transcript: Transcript, direction: str) -> None:
    """Copy ``source`` to ``sink`` line by line, recording each line first."""
    try:
        for raw in iter(source.readline, b""):
            if raw.strip():
                transcript.record(direction, raw)
            try:
                sink.write(raw)
                sink.flush()
            except (BrokenPipeError, ValueError, OSError):
                break
    finally:
        try:
            sink.close()
        except (BrokenPipeError, OSError):
            pass


def transcript_path(args: argparse.Namespace) -> Path:
    if args.transcript:
        return Path(args.transcript)
    directory = args.transcript_dir or os.environ.get("ACP_TEE_DIR")
    if not directory:
        raise SystemExit("acp_tee: give --transcript FILE, --transcript-dir DIR or ACP_TEE_DIR")
    return Path(directory) / f"{time.time_ns()}-{os.getpid()}.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", help="append the conversation to this file")
    parser.add_argument("--transcript-dir", help="write <ns>-<pid>.jsonl in this directory")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- agent command and args")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("missing agent command after --")

    transcript = Transcript(transcript_path(args))
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)

    to_agent = threading.Thread(target=_pump, args=(sys.stdin.buffer, child.stdin, transcript, "client"), daemon=True)
    to_client = threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, transcript, "agent"), daemon=True)
    to_agent.start()
    to_client.start()
    # The conversation is over when the agent's stdout closes (it exited or
    # closed it); the client->agent pump may still be blocked on our stdin.
    to_client.join()
    code = child.wait()
    transcript.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
