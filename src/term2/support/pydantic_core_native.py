"""pydantic-core's compiled validator and serializer, without the package's schema-typing module.

``pydantic_core/__init__.py`` (2.46) imports ``core_schema`` for four type names: ~80 TypedDicts that
type schemas written in Python, each annotation turned into a ``ForwardRef`` by ``compile()``, ~10 ms
on the machines we measure, before `session/new` can validate its parameters. term2 writes its
schemas as dicts and only calls the compiled module (``pydantic_core._pydantic_core``), which needs
nothing of the package's Python. So while the package is not imported, the compiled module is loaded
by its own spec and registered under its own name; when pydantic imports the package later, its
``from ._pydantic_core import ...`` finds that module, and everything shares one set of classes.
`tests/unit/test_pydantic_core_native.py` checks both orders; `tests/e2e/test_session_new_imports_e2e.py`
that the first `session/new` is answered without ``core_schema``. Once the package is imported, or if
its layout ever changes, this is a plain import.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

NATIVE = "pydantic_core._pydantic_core"


def native() -> ModuleType:
    """The compiled module, loaded alone unless the package is already imported."""
    loaded = sys.modules.get(NATIVE)
    if loaded is not None:
        return loaded
    if "pydantic_core" not in sys.modules:
        package = importlib.machinery.PathFinder.find_spec("pydantic_core")
        locations = package.submodule_search_locations if package is not None else None
        spec = importlib.machinery.PathFinder.find_spec(NATIVE, locations) if locations else None
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[NATIVE] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[NATIVE]
                raise
            return module
    return importlib.import_module(NATIVE)
