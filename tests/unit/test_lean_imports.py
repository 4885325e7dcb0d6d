"""The composition root's libraries load without the optional parts term2 never uses (lean_imports, ADR 0048).

Checked in a fresh interpreter: whether a module was imported is a fact of
the process, and this test process has imported half the world already.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from term2.app.entrypoints.lean_imports import import_lean
for module in ("dependency_injector.providers", "dependency_injector.containers"):
    import_lean(module)
import dependency_injector.wiring  # what the containers import: it probes web frameworks
unwanted = ("starlette", "fastapi", "werkzeug", "yaml", "pydantic_settings")
print(json.dumps(sorted(m for m in unwanted if m in sys.modules)))
"""


def test_dependency_injector_loads_no_web_framework_and_no_config_loader() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


PYDANTIC_PROBE = """
import json, sys
from term2.app.entrypoints.lean_imports import import_lean
for module in ("dependency_injector.providers", "dependency_injector.containers"):
    import_lean(module)
from dependency_injector import providers
loaded_with_it = "pydantic" in sys.modules
import pydantic
print(json.dumps([loaded_with_it, pydantic.VERSION, hasattr(pydantic, "BaseModel"), providers.Factory(dict, a=1)()]))
"""


def test_dependency_injector_loads_without_pydantic_which_then_imports_for_real() -> None:
    """It only reads `pydantic.VERSION` (ADR 0052); the stand-in it saw is gone once it has loaded."""
    out = subprocess.run([sys.executable, "-c", PYDANTIC_PROBE], capture_output=True, text=True, check=True).stdout
    loaded_with_it, version, real, made = json.loads(out)
    assert not loaded_with_it
    assert version.startswith("2.") and real and made == {"a": 1}
