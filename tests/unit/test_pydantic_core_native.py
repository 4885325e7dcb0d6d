"""pydantic-core's compiled module loaded alone, then the package and pydantic over it (and the other order).

Each case runs in a fresh interpreter: what matters is the order modules are first imported in.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

NATIVE_FIRST = """
import sys
from term2.support.pydantic_core_native import native

core = native()
assert "pydantic_core.core_schema" not in sys.modules and "pydantic_core" not in sys.modules
field = {"type": "typed-dict-field", "schema": {"type": "int"}}
validator = core.SchemaValidator({"type": "typed-dict", "fields": {"n": field}})
assert validator.validate_python({"n": "3"}) == {"n": 3}
try:
    validator.validate_python({"n": "x"})
except core.ValidationError as exc:
    assert exc.errors()[0]["loc"] == ("n",)
else:
    raise AssertionError("no error")

import pydantic_core
import pydantic_core._pydantic_core as as_pydantic_imports_it  # pydantic.version's form
from pydantic import TypeAdapter, ValidationError

assert as_pydantic_imports_it is core and pydantic_core.SchemaValidator is core.SchemaValidator
assert ValidationError is core.ValidationError  # one class: an error from pydantic is caught as the native one
try:
    TypeAdapter(int).validate_python("x")
except core.ValidationError:
    pass
else:
    raise AssertionError("no error")
assert core.to_json({"a": (1, None)}) == b'{"a":[1,null]}'
print("ok")
"""

PACKAGE_FIRST = """
import sys
import pydantic_core
from term2.support.pydantic_core_native import native

assert native() is sys.modules["pydantic_core._pydantic_core"]
assert native().SchemaValidator is pydantic_core.SchemaValidator
print("ok")
"""


@pytest.mark.parametrize("program", [NATIVE_FIRST, PACKAGE_FIRST], ids=["native-first", "package-first"])
def test_one_compiled_module_whichever_is_imported_first(program: str) -> None:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
