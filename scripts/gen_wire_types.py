#!/usr/bin/env python3
"""Generate term2's typed ACP wire messages from the vendored official schemas (ADR 0012).

Usage: python scripts/gen_wire_types.py [--check]

Writes `src/term2/adapters/acp/wire_types/{__init__,v1,v2}.py`: one TypedDict or
type alias per schema definition that the messages of term2's methods reach,
so mypy checks every message term2 builds against the schema of its version.
With --check nothing is written; the exit status is 1 when the committed files
differ from what this script would write (a test runs this in CI).

Standard library only, and deliberately small: it understands the subset of
JSON Schema the ACP schemas use and stops with an error on anything else,
rather than guessing.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
ACP_DIR = REPO_ROOT / "src" / "term2" / "adapters" / "acp"
OUT_DIR = ACP_DIR / "wire_types"
PACKAGE = "@agentclientprotocol/sdk"  # its versions: the pins in conformance/package.json
SCHEMAS = {  # module name: (what it describes, vendored schema, the conformance kit's name for the package)
    "v1": ("ACP v1", ACP_DIR / "schema" / "v1" / "schema.json", "sdk24"),  # 2.4.0, an npm alias (ADR 0043)
    "v2": ("the ACP v2 draft", ACP_DIR / "schema" / "v2" / "schema.unstable.json", PACKAGE),  # 1.4.0, v2's page
}

# The methods term2 serves, calls or receives; their params and results are the roots.
METHODS = frozenset({
    "$/cancel_request",
    "fs/read_text_file",
    "fs/write_text_file",
    "initialize",
    "session/cancel",
    "session/close",
    "session/list",
    "session/load",
    "session/new",
    "session/prompt",
    "session/request_permission",
    "session/resume",
    "session/update",
})
V1_ONLY_METHODS = frozenset({"authenticate", "logout", "session/delete", "session/set_config_option"})  # v2 connections accept none of them (ADR 0043, 0046)
EXTRA_ROOTS = ("Error", "RequestId")  # the JSON-RPC error object and id, method-independent
# Union members that only exist so receivers keep unknown values ("other": custom or future).
CATCH_ALL_TITLES = frozenset({"other", "unknown"})
MAX_LINE = 120
IGNORED_KEYWORDS = frozenset({
    "$schema", "title", "description", "default", "format", "minimum", "maximum", "minItems",
    "minLength", "pattern", "contentEncoding", "discriminator", "additionalProperties", "unevaluatedProperties",
})


class SchemaError(Exception):
    """The schema uses something this generator does not translate."""


@dataclass
class ClassItem:
    name: str
    bases: list[str]
    fields: list[tuple[str, str, bool]]  # name, type expression, required
    doc: str


@dataclass
class AliasItem:
    name: str
    expr: str
    doc: str
    open_union: bool = False


Item = ClassItem | AliasItem


def _pascal(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", text) if part)


def _literal(value: object) -> str:
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int)):
        raise SchemaError(f"unsupported const {value!r}")
    return json.dumps(value)


def _doc(description: str | None) -> str:
    """The first paragraph that says something, without doc links, marking unstable definitions as such."""
    paragraphs = [p.strip() for p in (description or "").split("\n\n") if p.strip()]
    unstable = bool(paragraphs) and paragraphs[0] == "**UNSTABLE**"
    paragraphs = [p for p in paragraphs if p != "**UNSTABLE**" and not p.startswith("This capability is not part")]
    text = " ".join(paragraphs[0].split()).split(" See protocol docs:")[0] if paragraphs else ""
    return f"Unstable. {text}" if unstable else text


class Generator:
    """Translates the definitions reachable from term2's methods, one version's schema at a time."""

    def __init__(self, schema: dict[str, Any], methods: frozenset[str] = METHODS) -> None:
        self._defs: dict[str, Any] = schema["$defs"]
        self.items: dict[str, Item] = {}
        self._building: set[str] = set()
        for name in sorted(self._defs):
            if self._defs[name].get("x-method") in methods:
                self.define(name)
        for name in EXTRA_ROOTS:
            self.define(name)

    # -- definitions ------------------------------------------------------
    def define(self, name: str) -> str:
        if name not in self.items and name not in self._building:
            self._building.add(name)
            self._build(name, self._defs[name])
            self._building.discard(name)
        return name

    def _build(self, name: str, schema: dict[str, Any]) -> None:
        if _is_object(schema):
            self._object(name, schema, _doc(schema.get("description")))
        else:
            expr, open_union = self._expr_open(schema, name)
            self._add(AliasItem(name, expr, _doc(schema.get("description")), open_union))

    def _add(self, item: Item) -> None:
        if item.name in self.items:
            raise SchemaError(f"two definitions would be named {item.name}")
        self.items[item.name] = item

    def _object(self, name: str, schema: dict[str, Any], doc: str) -> None:
        _check_keywords(schema, name, {"type", "properties", "required", "allOf", "oneOf", "anyOf"})
        bases: list[str] = []
        union_base: str | None = None
        for part in schema.get("allOf", []):
            base = self.define(_ref_name(part, name))
            if isinstance(self.items.get(base), ClassItem):
                bases.append(base)
            elif union_base is None:
                union_base = base
            else:
                raise SchemaError(f"{name}: more than one union in allOf")
        required = set(schema.get("required", []))
        fields = []
        for prop, prop_schema in schema.get("properties", {}).items():
            if not prop.isidentifier() or keyword.iskeyword(prop):
                raise SchemaError(f"{name}.{prop}: not a Python identifier")
            fields.append((prop, self._expr(prop_schema, name + _pascal(prop)), prop in required))
        variants_of = next((schema[key] for key in ("oneOf", "anyOf") if key in schema), None)
        if variants_of is not None:  # shared fields plus one of several variants: the fields go to each
            if union_base is not None:
                raise SchemaError(f"{name}: both allOf a union and its own variants")
            expr, open_union = self._union(variants_of, name)
            for member in _union_members(expr):
                variant = self.items.get(member)  # built by _union just now
                if not isinstance(variant, ClassItem) or {f[0] for f in variant.fields} & {f[0] for f in fields}:
                    raise SchemaError(f"{name}: variant {member} is not an object or redefines a shared field")
                variant.fields = fields + variant.fields
                variant.bases = [b for b in variant.bases if b != "TypedDict"] + bases or ["TypedDict"]
            self._add(AliasItem(name, expr, doc, open_union))
            return
        if union_base is None:
            self._add(ClassItem(name, bases or ["TypedDict"], fields, doc))
            return
        # An object that is also one of a union's variants is one class per variant.
        union = self.items[union_base]
        assert isinstance(union, AliasItem)
        members = _union_members(union.expr)
        if not all(isinstance(self.items.get(m), ClassItem) for m in members):
            raise SchemaError(f"{name}: allOf names {union_base}, a union of non-objects")
        names = [name + member.removeprefix(union_base) for member in members]
        for variant_name, member in zip(names, members, strict=True):
            self._add(ClassItem(variant_name, [*bases, member], fields, doc))
        self._add(AliasItem(name, " | ".join(names), doc, union.open_union))

    # -- type expressions -------------------------------------------------
    def _expr(self, schema: dict[str, Any], hint: str) -> str:
        expr, open_union = self._expr_open(schema, hint)
        if open_union:
            raise SchemaError(f"{hint}: an open union inline; only named definitions may be open")
        return expr

    def _expr_open(self, schema: dict[str, Any], hint: str) -> tuple[str, bool]:
        """A type expression, and whether a catch-all member was left out of it."""
        for key in ("oneOf", "anyOf"):
            if key in schema:
                _check_keywords(schema, hint, {key})
                return self._union(schema[key], hint)
        return self._single(schema, hint), False

    def _single(self, schema: dict[str, Any], hint: str) -> str:
        if "$ref" in schema:
            _check_keywords(schema, hint, {"$ref"})
            return self.define(_ref_name(schema, hint))
        if "const" in schema:
            _check_keywords(schema, hint, {"const", "type"})
            return f"Literal[{_literal(schema['const'])}]"
        if "enum" in schema:
            _check_keywords(schema, hint, {"enum", "type"})
            return f"Literal[{', '.join(_literal(v) for v in schema['enum'])}]"
        if "allOf" in schema and not _is_object(schema):
            _check_keywords(schema, hint, {"allOf"})
            if len(schema["allOf"]) != 1:
                raise SchemaError(f"{hint}: allOf with several parts outside an object")
            return self._expr(schema["allOf"][0], hint)
        kind = schema.get("type")
        if isinstance(kind, list):
            return _join([self._single({**schema, "type": k}, hint) for k in kind])
        if _is_object(schema):
            self._object(hint, schema, _doc(schema.get("description")))
            return hint
        _check_keywords(schema, hint, {"type", "items"})
        if kind is None:
            return "Any"  # the schema allows any JSON value here
        if kind == "array":
            return f"list[{self._expr(schema['items'], hint + 'Item') if 'items' in schema else 'Any'}]"
        if kind == "object":
            extra = schema.get("additionalProperties", True)
            return f"dict[str, {self._expr(extra, hint + 'Value') if isinstance(extra, dict) else 'Any'}]"
        scalars = {"null": "None", "string": "str", "integer": "int", "number": "float", "boolean": "bool"}
        if kind not in scalars:
            raise SchemaError(f"{hint}: unsupported type {kind!r}")
        return scalars[kind]

    def _union(self, members: list[dict[str, Any]], hint: str) -> tuple[str, bool]:
        parts: list[str] = []
        open_union = False
        for member in members:
            if _is_catch_all(member, members):
                open_union = True
                continue
            if _is_object(member):
                tag = _discriminator(member) or member.get("title")
                if not isinstance(tag, str):
                    raise SchemaError(f"{hint}: an object variant without a discriminator or title")
                variant = hint + _pascal(tag)
                if variant in self._defs:  # e.g. AuthMethod's "terminal" variant extends AuthMethodTerminal
                    variant += "Variant"
                self._object(variant, member, _doc(member.get("description")))
                parts.append(variant)
            else:
                parts.append(self._expr(member, hint))
        return _join(parts), open_union


def _ref_name(schema: dict[str, Any], where: str) -> str:
    ref = schema.get("$ref", "")
    if not ref.startswith("#/$defs/"):
        raise SchemaError(f"{where}: unsupported reference {ref!r}")
    return str(ref.removeprefix("#/$defs/"))


def _is_object(schema: dict[str, Any]) -> bool:
    return "properties" in schema or (schema.get("type") == "object" and "allOf" in schema)


def _check_keywords(schema: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = {k for k in schema if not k.startswith("x-")} - IGNORED_KEYWORDS - allowed
    if unknown:
        raise SchemaError(f"{where}: unsupported keywords {sorted(unknown)}")


def _discriminator(member: dict[str, Any]) -> object:
    consts = [p["const"] for p in member.get("properties", {}).values() if "const" in p]
    return consts[0] if len(consts) == 1 else None


def _is_catch_all(member: dict[str, Any], members: list[dict[str, Any]]) -> bool:
    """A variant for values the schema does not name yet: kept by receivers, never sent by term2.

    Integer catch-alls stay: JSON-RPC leaves every other error code to the implementation.
    """
    if str(member.get("title", "")).lower() not in CATCH_ALL_TITLES or member.get("type") not in ("string", "object"):
        return False
    named = [m for m in members if m is not member]
    return "const" not in member and _discriminator(member) is None and all(
        "const" in m or _discriminator(m) is not None or "$ref" in m for m in named
    )


def _join(parts: list[str]) -> str:
    """Union of parts, literals merged into one `Literal[...]`, duplicates dropped, None last."""
    literals = [p.removeprefix("Literal[").removesuffix("]") for p in parts if p.startswith("Literal[")]
    others = [p for p in dict.fromkeys(parts) if not p.startswith("Literal[") and p != "None"]
    merged = [f"Literal[{', '.join(dict.fromkeys(literals))}]"] if literals else []
    return " | ".join(merged + others + (["None"] if "None" in parts else []))


def _split_top(expr: str, sep: str) -> list[str]:
    """Split at `sep` outside brackets and string literals."""
    parts, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(expr):
        if char == '"' and expr[index - 1] != "\\":
            quoted = not quoted
        elif not quoted and char in "[(":
            depth += 1
        elif not quoted and char in "])":
            depth -= 1
        elif not quoted and depth == 0 and expr.startswith(sep, index):
            parts.append(expr[start:index].strip())
            start = index + len(sep)
    return [*parts, expr[start:].strip()]


def _union_members(expr: str) -> list[str]:
    return _split_top(expr, "|")


# -- rendering ----------------------------------------------------------------
def _docstring(doc: str, indent: str) -> list[str]:
    text = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(text, MAX_LINE - len(indent) - 6) or [""]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *(indent + line for line in lines[1:-1]), f'{indent}{lines[-1]}"""']


def _wrap_expr(head: str, expr: str, indent: str) -> list[str]:
    """`head + expr` on one line, or split inside brackets the way ruff format does.

    A union goes in parentheses, a subscript is split inside its brackets: first
    onto one indented line, else one member per line.
    """
    if len(indent + head + expr) <= MAX_LINE:
        return [indent + head + expr]
    inner = indent + "    "
    parts = _union_members(expr)
    if len(parts) > 1:
        if len(inner + expr) <= MAX_LINE:
            return [f"{indent}{head}(", inner + expr, f"{indent})"]
        return [f"{indent}{head}(", inner + parts[0], *(f"{inner}| {p}" for p in parts[1:]), f"{indent})"]
    opener = expr[: expr.index("[") + 1] if "[" in expr else ""
    if not opener or not expr.endswith("]"):
        raise SchemaError(f"cannot wrap {head}{expr}")
    inside = expr[len(opener) : -1]
    if opener != "Literal[":  # e.g. NotRequired[A | B]: wrap what is inside
        return [f"{indent}{head}{opener}", *_wrap_expr("", inside, inner), f"{indent}]"]
    if len(inner + inside) <= MAX_LINE:
        return [f"{indent}{head}{opener}", inner + inside, f"{indent}]"]
    return [f"{indent}{head}{opener}", *(f"{inner}{v}," for v in _split_top(inside, ",")), f"{indent}]"]


def _render_class(item: ClassItem) -> list[str]:
    lines = [f"class {item.name}({', '.join(item.bases)}):"]
    if item.doc:
        lines += _docstring(item.doc, "    ")
        if item.fields:
            lines.append("")
    for name, expr, required in item.fields:
        lines += _wrap_expr(f"{name}: ", expr if required else f"NotRequired[{expr}]", "    ")
    if not item.doc and not item.fields:
        lines.append("    pass")
    return lines


def _render_alias(item: AliasItem) -> list[str]:
    lines = [f"# {line}" for line in textwrap.wrap(item.doc, MAX_LINE - 2)] if item.doc else []
    if item.open_union:
        lines.append("# Open in the schema (custom or future values, extensions start with `_`): only these are typed.")
    return lines + _wrap_expr(f"{item.name}: TypeAlias = ", item.expr, "")


def _order(items: dict[str, Item]) -> list[Item]:
    """By name, except that what a line evaluates at import time (bases, alias parts) comes first."""
    done: dict[str, bool] = {}
    out: list[Item] = []

    def visit(name: str) -> None:
        if done.get(name):
            return
        if name in done:
            raise SchemaError(f"{name} depends on itself at import time")
        done[name] = False
        item = items[name]
        deps = item.bases if isinstance(item, ClassItem) else re.findall(r"\b[A-Z]\w*", item.expr)
        for dep in sorted(d for d in deps if d in items):
            visit(dep)
        done[name] = True
        out.append(item)

    for name in sorted(items):
        visit(name)
    return out


def _sdk(alias: str = PACKAGE) -> str:
    """The package and version a schema comes from; an alias pin reads `npm:<package>@<version>`."""
    pins = json.loads((REPO_ROOT / "conformance" / "package.json").read_text(encoding="utf-8"))["dependencies"]
    pin = str(pins[alias])
    return pin.removeprefix("npm:") if pin.startswith("npm:") else f"{PACKAGE}@{pin}"


def render_module(version: str) -> str:
    label, path, alias = SCHEMAS[version]
    methods = METHODS | V1_ONLY_METHODS if version == "v1" else METHODS
    items = Generator(json.loads(path.read_text(encoding="utf-8")), methods).items
    body: list[str] = []
    for item in _order(items):
        rendered = _render_class(item) if isinstance(item, ClassItem) else _render_alias(item)
        body += ["", "", *rendered]
    text = "\n".join(body)
    names = ("Any", "Literal", "NotRequired", "TypeAlias", "TypedDict")
    typing_names = [n for n in names if re.search(rf"\b{n}\b", text)]
    if not text.startswith("\n\nclass "):
        text = text.removeprefix("\n")  # isort: one blank line after imports unless a class follows
    source = path.relative_to(REPO_ROOT)
    header = [
        f"# generated by scripts/gen_wire_types.py from {source}; do not edit.",
        f'"""The wire messages of {label} that term2 sends and receives, as typed dicts ({_sdk(alias)}).',
        "",
        "One definition per schema definition reachable from term2's methods. Union members that",
        "only let receivers keep custom or future values are left out, so mypy checks that term2",
        "sends values the schema names; an extension value (leading `_`) needs an explicit cast.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"from typing import {', '.join(typing_names)}",
    ]
    return "\n".join(header) + "\n" + text + "\n"


def render_package() -> str:
    return (
        "# generated by scripts/gen_wire_types.py; do not edit.\n"
        f'"""ACP wire types generated from the official schemas (ADR 0012, 0043): v1 from\n'
        f"{_sdk('sdk24')}, the v2 draft from {_sdk()}.\n"
        "\n"
        "Import `v1` or `v2` under `if TYPE_CHECKING:`: they are for mypy, and importing\n"
        "them at run time would only cost start-up.\n"
        '"""\n'
    )


def generate() -> dict[Path, str]:
    files = {OUT_DIR / "__init__.py": render_package()}
    for version in sorted(SCHEMAS):
        files[OUT_DIR / f"{version}.py"] = render_module(version)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files are not up to date")
    args = parser.parse_args(argv)
    try:
        files = generate()
    except SchemaError as exc:
        print(f"gen_wire_types: {exc}", file=sys.stderr)
        return 2
    stale = [path for path, text in files.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            shown = os.path.relpath(path, REPO_ROOT)
            print(f"gen_wire_types: {shown} is not what the schema generates", file=sys.stderr)
        if stale:
            print("gen_wire_types: run `uv run --frozen python scripts/gen_wire_types.py` and commit", file=sys.stderr)
        return 1 if stale else 0
    OUT_DIR.mkdir(exist_ok=True)
    for path in stale:
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {os.path.relpath(path, REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
