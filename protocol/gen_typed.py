"""Generate ``moldau.protocol.typed``: one ``TypedDict`` per request, response and nested struct of every API.

    python -m moldau.protocol.gen_typed            # rewrite protocol/typed.py from the declarations
    python -m moldau.protocol.gen_typed --check    # exit 1 if the checked-in file is stale

The declarations in ``protocol/messages`` stay the single source of truth and the compiled dict codec stays the
runtime: the TypedDicts only describe, for mypy and IDEs, the dicts the codec already decodes and encodes
(snake_case keys, every declared field). The module is generated ahead of time and checked in (and
tests/unit/protocol/test_typed.py fails when it is stale) rather than built at import time, because a type
checker reads source statically: classes made at run time are invisible to mypy and to an IDE. It also costs
the broker nothing: handlers import it only under ``TYPE_CHECKING`` (the broker never loads its ~300 classes).

Requiredness: a field is ``Required`` when it exists in every version its struct exists in, has no declared
default and is not tagged; every other field is ``NotRequired``. The encoder fills any absent field with its
default, so absence is never an error on the wire -- but for an always-present field without a declared default
(an error code, a name, an offset) the implicit 0 or "" is almost always a forgotten value, so mypy demands it.
Versioned fields are ``NotRequired`` so that one dict serves every version; a declared default (``-1`` for a
leader epoch, ``None`` for an optional id) says "usually this", so those may be left out too.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from moldau.protocol import messages
from moldau.protocol.api import REGISTRY
from moldau.protocol.schema import _MISSING, FIXED, Api, F, in_range

TARGET = Path(__file__).with_name("typed.py")

_PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint16": "int", "float64": "float",
              "bool": "bool", "uuid": "bytes", "string": "str", "bytes": "bytes", "records": "Records"}
assert set(FIXED) | {"string", "bytes", "records"} == set(_PRIMITIVE)

HEADER = '''"""Typed shapes of every Kafka message Moldau declares. GENERATED: python -m moldau.protocol.gen_typed

Do not edit: change the declaration in protocol/messages and regenerate (tests/unit/protocol/test_typed.py
fails when this file is stale). These TypedDicts describe the plain dicts the compiled codec (protocol/schema.py)
decodes and encodes; the codec never reads them, so they cost nothing at run time. The module is checked in,
not built at import time, because mypy and IDEs read it statically; the broker imports it only under
TYPE_CHECKING. Nested structs are named after their path (``MetadataResponseTopicsPartitions`` is one entry of
``MetadataResponse["topics"][i]["partitions"]``). ``Required`` fields exist in every version of their struct and
have no declared default; the others may be left out and the encoder sends their default (see gen_typed).
Nested classes come before their users and there is no ``from __future__ import annotations``: evaluated
annotations let ``__required_keys__`` see ``NotRequired`` at run time (Python 3.11 cannot in strings).
"""

from collections.abc import Sized
from typing import NotRequired, TypeAlias, TypedDict

# A records field decodes to a zero-copy memoryview; on encode it may also be bytes or a file region (anything
# with a length) that the network layer sends with sendfile.
Records: TypeAlias = bytes | bytearray | memoryview | Sized
'''


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _versions(spec: str | None, within: set[int]) -> set[int]:
    return {v for v in within if in_range(v, spec)}


class _Emitter:
    def __init__(self) -> None:
        self.classes: list[str] = []

    def struct(self, name: str, fields: list[F], exists: set[int], doc: str) -> str:
        """Emits the class (nested ones first) and returns its name."""
        lines = [f"class {name}(TypedDict):", f'    """{doc}"""', ""]
        for f in fields:
            present = _versions(f.versions, exists)  # may be empty: decoders still fill its default
            nullable = bool(_versions(f.nullable, present)) if f.nullable is not None else False
            py = self._type(f, f"{name}{_camel(f.name)}", present)
            if nullable:
                py = f"{py} | None"
            required = present == exists and f.default is _MISSING and f.tag is None
            lines.append(f"    {f.name}: {py if required else f'NotRequired[{py}]'}")
        self.classes.append("\n".join(lines))
        return name

    def _type(self, f: F, nested_name: str, present: set[int]) -> str:
        kind = f.kind()
        if kind == "primitive":
            return _PRIMITIVE[str(f.type)]
        if kind == "array":
            return f"list[{_PRIMITIVE[str(f.type)[2:]]}]"
        sub = self.struct(nested_name, f.subfields(), present, f"One ``{f.name}`` entry." if kind ==
                          "struct_array" else f"The ``{f.name}`` struct.")
        return f"list[{sub}]" if kind == "struct_array" else sub


def render() -> str:
    """The source of moldau/protocol/typed.py for the current declarations."""
    out = _Emitter()
    for key in sorted(REGISTRY):
        api = REGISTRY[key]
        supported = set(range(api.versions[0], api.versions[1] + 1))
        span = f"v{api.versions[0]}-v{api.versions[1]}"
        out.struct(f"{api.name}Request", api.request, supported, f"{api.name} request (key {key}), {span}.")
        out.struct(f"{api.name}Response", api.response, supported, f"{api.name} response (key {key}), {span}.")
    return HEADER + "".join(f"\n\n{cls}\n" for cls in out.classes)


def annotation_problems() -> list[str]:
    """Every registered API's declaration must be annotated ``Api[<Name>Request, <Name>Response]`` (the shapes
    this module generates): that annotation is what types the client's ``send`` and the broker's route table."""
    found: dict[int, str] = {}
    problems: list[str] = []
    for info in pkgutil.iter_modules(messages.__path__):
        module = importlib.import_module(f"{messages.__name__}.{info.name}")
        notes = getattr(module, "__annotations__", {})
        for const, value in vars(module).items():
            if not isinstance(value, Api) or value.key not in REGISTRY or REGISTRY[value.key] is not value:
                continue
            found[value.key] = const
            want = f"Api[{value.name}Request, {value.name}Response]"
            if notes.get(const) != want:
                problems.append(f"{module.__name__}.{const} must be annotated `{const}: {want} = Api(...)`")
    problems += [f"{REGISTRY[k].name} (key {k}) is not declared in protocol/messages" for k in REGISTRY
                 if k not in found]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the checked-in module is current")
    args = parser.parse_args(argv)
    source = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != source:
            print(f"{TARGET} is stale: run python -m moldau.protocol.gen_typed", file=sys.stderr)
            return 1
        problems = annotation_problems()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    TARGET.write_text(source, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
