"""Sandbox adapters: bubblewrap for real runs, a scripted fake for callers' tests."""

from term2.adapters.sandbox.bubblewrap import BubblewrapSandbox
from term2.adapters.sandbox.invocation import Limits
from term2.adapters.sandbox.scripted import Script, ScriptedSandbox

__all__ = ["BubblewrapSandbox", "Limits", "Script", "ScriptedSandbox"]
