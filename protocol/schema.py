"""A small declarative language for Kafka messages, compiled into fast encoders and decoders.

Each API is declared once for all the versions we support (see ``protocol/messages``). For a given
(api, version, direction) the field list is turned into straight-line Python source -- runs of fixed-width fields
become a single precompiled ``struct.Struct`` call -- compiled once and cached. Decoded messages are plain dicts
keyed by snake_case field names; every field of the declaration is present (absent-in-this-version and unsent
tagged fields get their defaults), so handlers never need version checks just to read a field.

Records fields decode to a zero-copy ``memoryview`` slice. On encode a records value may be bytes-like or any other
object with ``__len__`` (e.g. a file region): then only the length prefix is written and the object is returned as
a separate *part* for the network layer to send (with sendfile).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from moldau.protocol import types as T
from moldau.protocol.types import DecodeError

_MISSING: Any = object()

FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "float64": "d",
         "bool": "?", "uuid": "16s"}
VARIABLE = {"string", "bytes", "records"}
PRIMITIVES = set(FIXED) | VARIABLE

Decoder = Callable[[Any, int], tuple[dict[str, Any], int]]
Part = bytes | bytearray | memoryview | Any


def parse_versions(spec: str | None) -> tuple[int, int]:
    """'0+' -> (0, big); '3-5' -> (3, 5); '2' -> (2, 2); None/'none' -> empty range."""
    if spec is None or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def in_range(version: int, spec: str | None) -> bool:
    lo, hi = parse_versions(spec)
    return lo <= version <= hi


@dataclass(slots=True)
class Struct:
    """A single nested struct (not an array)."""

    fields: list[F]


@dataclass(slots=True)
class F:
    """One field: name (snake_case), type, the versions it exists in, and how it may be null or tagged."""

    name: str
    type: str | list[F] | Struct
    versions: str = "0+"
    nullable: str | None = None
    default: Any = _MISSING
    tag: int | None = None
    tagged: str | None = None

    def kind(self) -> str:
        if isinstance(self.type, list):
            return "struct_array"
        if isinstance(self.type, Struct):
            return "struct"
        if self.type.startswith("[]"):
            return "array"
        if self.type not in PRIMITIVES:
            raise ValueError(f"unknown type {self.type!r} for field {self.name}")
        return "primitive"

    def subfields(self) -> list[F]:
        if isinstance(self.type, list):
            return self.type
        if isinstance(self.type, Struct):
            return self.type.fields
        raise TypeError(self.name)

    def default_for(self, version: int) -> Any:
        if self.default is not _MISSING:
            return self.default
        if self.nullable is not None and in_range(version, self.nullable):
            return None
        kind = self.kind()
        if kind in ("struct_array", "array"):
            return []
        if kind == "struct":
            return {f.name: f.default_for(version) for f in self.subfields()}
        return {"string": "", "bytes": b"", "records": None, "bool": False, "uuid": T.ZERO_UUID,
                "float64": 0.0}.get(str(self.type), 0)


@dataclass(slots=True)
class Message:
    fields: list[F]


def _plain(value: Any) -> bool:
    """True when ``repr(value)`` is a literal that evaluates to an equal, fresh ``value`` (dicts with string keys,
    lists, and None/bool/int/str leaves)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _READ_UVARINT(target: str) -> list[str]:
    """Source reading an unsigned varint into ``target``: a one-byte one (under 128: lengths, counts, tag
    counts, nearly always) inline, without a call and a tuple."""
    return [f"{target} = buf[pos]", f"if {target} < 128:", "    pos += 1", "else:",
            f"    {target}, pos = read_uvarint(buf, pos)"]


class _Gen:
    """Generates the source of one (fields, version, flexible) codec and its nested helpers."""

    def __init__(self, version: int, flexible: bool, label: str = "message") -> None:
        self.v = version
        self.flex = flexible
        self.label = label
        self.funcs: list[str] = []
        self.ns: dict[str, Any] = {
            "DecodeError": DecodeError, "read_uvarint": T.read_uvarint, "write_uvarint": T.write_uvarint,
            "read_string": T.read_string, "INT16": T.INT16, "INT32": T.INT32, "struct": struct,
            "_is_bytes": (bytes, bytearray, memoryview), "_unknown": _unknown_fields,
        }
        self._ids = itertools.count()

    def _name(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def _const(self, value: Any, copy: bool = True) -> str:
        """Source for a default value. Decoders copy mutable defaults (handlers may change what they get);
        encoders only read them, so they share one object instead of deep-copying it per struct."""
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return repr(value)
        if value == []:
            return "[]"
        if copy and _plain(value):
            # A literal builds a fresh object at each call: a decoded Fetch answer has three tagged struct
            # defaults per partition, and deep-copying them was a third of a follower's decoding time.
            return repr(value)
        name = self._name("_c")
        self.ns[name] = value
        return f"__import__('copy').deepcopy({name})" if copy and isinstance(value, (dict, list)) else name

    def _split(self, fields: list[F]) -> tuple[list[F], list[F], list[F]]:
        active = [f for f in fields if in_range(self.v, f.versions)]
        absent = [f for f in fields if not in_range(self.v, f.versions)]
        tagged = sorted((f for f in active if self.flex and f.tag is not None and in_range(self.v, f.tagged)),
                        key=lambda f: f.tag or 0)
        regular = [f for f in active if f not in tagged]
        return regular, tagged, absent

    def _fixed_struct(self, type_name: str) -> str:
        """Name of a precompiled struct.Struct for one fixed-width field, placed in the generated namespace."""
        sname = self._name("_S")
        self.ns[sname] = struct.Struct(">" + FIXED[type_name])
        return sname

    def _nullable(self, f: F) -> bool:
        return f.nullable is not None and in_range(self.v, f.nullable)

    # ---------------------------------------------------------------- decoding
    def decoder(self, fields: list[F]) -> str:
        name = self._name("_d")
        regular, tagged, absent = self._split(fields)
        body: list[str] = ["r = {}"]
        for f in absent + tagged:
            body.append(f"r[{f.name!r}] = {self._const(f.default_for(self.v))}")
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and regular[i].kind() == "primitive" and regular[i].type in FIXED:
                run.append(regular[i])
                i += 1
            if run:
                s = struct.Struct(">" + "".join(FIXED[str(f.type)] for f in run))
                sname = self._name("_S")
                self.ns[sname] = s
                targets = "".join(f"r[{f.name!r}], " for f in run)
                body.append(f"{targets}= {sname}.unpack_from(buf, pos)")
                body.append(f"pos += {s.size}")
                continue
            f = regular[i]
            i += 1
            body += self._decode_value(f, f"r[{f.name!r}]")
        if self.flex:
            body += self._decode_tags(tagged)
        body.append("return r, pos")
        self.funcs.append(f"def {name}(buf, pos):\n" + "\n".join("    " + line for line in body))
        return name

    def _decode_len(self, f: F, wide: bool) -> list[str]:
        if self.flex:
            return _READ_UVARINT("n") + ["n -= 1"]
        if wide:
            return ["n, = INT32.unpack_from(buf, pos)", "pos += 4"]
        return ["n, = INT16.unpack_from(buf, pos)", "pos += 2"]

    def _null_check(self, f: F, target: str) -> list[str]:
        if self._nullable(f):
            return ["if n < 0:", f"    {target} = None", "else:"]
        return ["if n < 0:", f"    raise DecodeError('null value for non-nullable field {f.name}')", "else:"]

    def _decode_value(self, f: F, target: str) -> list[str]:
        kind = f.kind()
        if kind == "struct":
            sub = self.decoder(f.subfields())
            if self._nullable(f):  # Kafka's nullable struct: an int8 marker, -1 null, 1 present
                return ["marker, = struct.unpack_from('b', buf, pos)", "pos += 1", "if marker < 0:",
                        f"    {target} = None", "else:", f"    {target}, pos = {sub}(buf, pos)"]
            return [f"{target}, pos = {sub}(buf, pos)"]
        if kind == "primitive" and f.type in FIXED:
            sname = self._fixed_struct(str(f.type))
            return [f"{target}, = {sname}.unpack_from(buf, pos)", f"pos += {self.ns[sname].size}"]
        if kind == "primitive":
            out = self._decode_len(f, f.type != "string") + self._null_check(f, target)
            if f.type == "string":
                out.append(f"    {target}, pos = read_string(buf, pos, n)")
            else:
                out += ["    end = pos + n",
                        "    if end > len(buf): raise DecodeError('bytes field exceeds the message')",
                        f"    {target} = {'buf[pos:end]' if f.type == 'records' else 'bytes(buf[pos:end])'}",
                        "    pos = end"]
            return out
        out = self._decode_len(f, True) + self._null_check(f, target)
        out.append("    if n > len(buf) - pos: raise DecodeError('array count exceeds the message')")
        if kind == "array":
            elem = str(f.type)[2:]
            if elem in FIXED and elem != "uuid":
                code = FIXED[elem]
                size = struct.calcsize(">" + code)
                out += [f"    {target} = list(struct.unpack_from('>%d{code}' % n, buf, pos))",
                        f"    pos += n * {size}"]
                return out
            item = F("item", elem)
            inner = self._decode_value(item, "v")
            out += ["    a = []", "    for _ in range(n):"] + ["        " + line for line in inner]
            out += ["        a.append(v)", f"    {target} = a"]
            return out
        sub = self.decoder(f.subfields())
        out += ["    a = []", "    for _ in range(n):", f"        v, pos = {sub}(buf, pos)", "        a.append(v)",
                f"    {target} = a"]
        return out

    def _decode_tags(self, tagged: list[F]) -> list[str]:
        out = _READ_UVARINT("nt") + ["for _ in range(nt):",
               "    tag, pos = read_uvarint(buf, pos)", "    size, pos = read_uvarint(buf, pos)",
               "    end = pos + size", "    if end > len(buf): raise DecodeError('tagged field exceeds message')"]
        for j, f in enumerate(tagged):
            kw = "if" if j == 0 else "elif"
            out.append(f"    {kw} tag == {f.tag}:")
            out += ["        " + line for line in self._decode_value(f, f"r[{f.name!r}]")]
        out.append("    pos = end")
        return out

    # ---------------------------------------------------------------- encoding
    def encoder(self, fields: list[F], path: str = "") -> str:
        name = self._name("_e")
        regular, tagged, _ = self._split(fields)
        # Strictness costs one subset test per struct: the names this struct declares in *any* version
        # (clients pass one dict for many versions), precomputed; anything else is a typo and raises.
        known = self._name("_K")
        self.ns[known] = frozenset(f.name for f in fields)
        where = f"{self.label} v{self.v}" + (f" {path}" if path else "")
        body: list[str] = [f"if not r.keys() <= {known}: _unknown(r, {known}, {where!r})", "g = r.get"]
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and regular[i].kind() == "primitive" and regular[i].type in FIXED:
                run.append(regular[i])
                i += 1
            if run:
                sname = self._name("_S")
                self.ns[sname] = struct.Struct(">" + "".join(FIXED[str(f.type)] for f in run))
                args = ", ".join(f"g({f.name!r}, {self._const(f.default_for(self.v), False)})" for f in run)
                body.append(f"b += {sname}.pack({args})")
                continue
            f = regular[i]
            i += 1
            body.append(f"v = g({f.name!r}, {self._const(f.default_for(self.v), False)})")
            body += self._encode_value(f, "b", path)
        if self.flex:
            if not tagged:
                body.append("b.append(0)")
            else:
                # None of the tagged fields given (the common case: a Fetch answer's partitions): no tags.
                names = self._name("_T")
                self.ns[names] = frozenset(f.name for f in tagged)
                tags = ["tags = []"]
                for f in tagged:
                    # An unset or default tagged field is not sent.
                    default = self._const(f.default_for(self.v), False)
                    tags += [f"v = g({f.name!r}, {default})", f"if v != {default}:", "    tb = bytearray()"]
                    tags += ["    " + line for line in self._encode_value(f, "tb", path)]
                    tags.append(f"    tags.append(({f.tag}, tb))")
                tags += ["write_uvarint(b, len(tags))", "for tag, tb in tags:", "    write_uvarint(b, tag)",
                         "    write_uvarint(b, len(tb))", "    b += tb"]
                body += [f"if r.keys().isdisjoint({names}):", "    b.append(0)", "else:"]
                body += ["    " + line for line in tags]
        self.funcs.append(f"def {name}(b, w, r):\n" + "\n".join("    " + line for line in body))
        return name

    def _encode_len(self, n: str, out: str, wide: bool) -> str:
        if self.flex:  # a one-byte varint (under 128) inline, without a call
            return f"_n = {n} + 1; {out}.append(_n) if _n < 128 else write_uvarint({out}, _n)"
        return f"{out} += {'INT32' if wide else 'INT16'}.pack({n})"

    def _encode_null(self, f: F, out: str) -> list[str]:
        if self._nullable(f):
            if self.flex:
                null = f"{out}.append(0)"
            elif f.kind() == "primitive" and f.type == "string":
                null = f"{out} += b'\\xff\\xff'"
            else:
                null = f"{out} += b'\\xff\\xff\\xff\\xff'"
            return ["if v is None:", f"    {null}", "else:"]
        return ["if v is None:", f"    raise ValueError('field {f.name} is not nullable in this version')", "else:"]

    def _encode_value(self, f: F, out: str, path: str = "") -> list[str]:
        kind = f.kind()
        sub_path = f"{path}.{f.name}" if path else f.name
        if kind == "struct":
            sub = self.encoder(f.subfields(), sub_path)
            if self._nullable(f):
                return ["if v is None:", f"    {out}.append(0xff)", "else:", f"    {out}.append(1)",
                        f"    {sub}({out}, w, v)"]
            return [f"{sub}({out}, w, v)"]
        if kind == "primitive" and f.type in FIXED:
            return [f"{out} += {self._fixed_struct(str(f.type))}.pack(v)"]
        lines = self._encode_null(f, out)
        if kind == "primitive":
            if f.type == "string":
                lines += ["    e = v.encode('utf-8')", "    " + self._encode_len("len(e)", out, False),
                          f"    {out} += e"]
            elif f.type == "bytes":
                lines += ["    " + self._encode_len("len(v)", out, True), f"    {out} += v"]
            else:
                lines += ["    " + self._encode_len("len(v)", out, True),
                          "    if isinstance(v, _is_bytes):", f"        {out} += v",
                          "    elif len(v):", f"        w.append((len({out}), v))"]
            return lines
        lines.append("    " + self._encode_len("len(v)", out, True))
        if kind == "array":
            elem = str(f.type)[2:]
            if elem in FIXED and elem != "uuid":
                lines.append(f"    {out} += struct.pack('>%d{FIXED[elem]}' % len(v), *v)")
                return lines
            inner = self._encode_value(F("item", elem), out, path)
            lines += ["    for v in list(v):"] + ["        " + line for line in inner]
            return lines
        sub = self.encoder(f.subfields(), sub_path + "[]")
        lines += ["    for it in v:", f"        {sub}({out}, w, it)"]
        return lines

    def build(self, entry: str) -> Any:
        src = "\n\n".join(self.funcs)
        code = compile(src, f"<moldau-schema v{self.v}>", "exec")
        exec(code, self.ns)
        return self.ns[entry]


def compile_decoder(fields: list[F], version: int, flexible: bool) -> Decoder:
    gen = _Gen(version, flexible)
    entry = gen.decoder(fields)
    fn = gen.build(entry)

    def decode(buf: Any, pos: int = 0) -> tuple[dict[str, Any], int]:
        try:
            result: tuple[dict[str, Any], int] = fn(buf, pos)
            return result
        except (struct.error, IndexError, TypeError) as exc:
            raise DecodeError(f"malformed message: {exc}") from exc

    return decode


# Encoders read any mapping: a TypedDict of protocol/typed.py is a Mapping, not a dict, to mypy.
Encoder = Callable[[bytearray, list[tuple[int, Any]], Mapping[str, Any]], None]


class UnknownFieldError(ValueError):
    """A message handed to an encoder names a field its declaration has in no version (a typo, usually)."""


def _unknown_fields(r: Any, known: frozenset[str], where: str) -> None:
    extra = sorted(set(r) - known)
    raise UnknownFieldError(f"{where}: unknown field(s) {', '.join(map(repr, extra))}; "
                            f"declared: {', '.join(sorted(known))}")


def compile_encoder(fields: list[F], version: int, flexible: bool, label: str = "message") -> Encoder:
    gen = _Gen(version, flexible, label)
    entry = gen.encoder(fields)
    fn: Encoder = gen.build(entry)
    return fn


def assemble(buf: bytearray, external: list[tuple[int, Any]]) -> list[Part]:
    """Split an encoded buffer at the points where external (sendfile) parts belong."""
    if not external:
        return [buf]
    parts: list[Part] = []
    start = 0
    for at, obj in external:
        if at > start:
            parts.append(memoryview(buf)[start:at])
        parts.append(obj)
        start = at
    if start < len(buf):
        parts.append(memoryview(buf)[start:])
    return parts


# The request and response shapes of one API (TypedDicts of protocol/typed.py, for mypy only).
Req = TypeVar("Req", bound=Mapping[str, Any])
Resp = TypeVar("Resp", bound=Mapping[str, Any])
Resp_co = TypeVar("Resp_co", covariant=True)
# The parameters of a request to one API: ``(body: XRequest, version: int | None = None)``.
P = ParamSpec("P")


class Sendable(Protocol[P, Resp_co]):
    """What a sender's signature reads of an :class:`Api`: ``send(api, *args: P.args) -> Resp``.

    Why not ``send(api: Api[Req, Resp], body: Req)``: mypy cannot check a literal dict body against a type
    variable that another argument fixes (it reports "Cannot infer value of type parameter"). A ParamSpec taken
    from the Api's ``signature`` makes the body's type known before the literal is checked, so a typo, a
    missing field or another API's request is reported as such."""

    def signature(self, *args: P.args, **kwargs: P.kwargs) -> Resp_co: ...


@dataclass(slots=True)
class Api(Generic[Req, Resp]):
    """One Kafka API: its key, the versions we support, the first flexible version, and both message shapes.

    Generic in its request and response types: each declaration in protocol/messages is annotated
    ``Api[XRequest, XResponse]`` with the TypedDicts of protocol/typed.py (imported under TYPE_CHECKING, so they
    cost nothing at run time), and everything that sends or serves an API is typed through it: the client
    connection's ``send(api, body: Req) -> Resp`` and the broker's route table (broker/apis ``route``), where a
    handler registered under another API's key is a mypy error. The codec itself stays dict-based and untyped.
    """

    key: int
    name: str
    versions: tuple[int, int]
    flexible: int | None
    request: list[F]
    response: list[F]
    _cache: dict[tuple[str, int], Any] = field(default_factory=dict, repr=False)

    if TYPE_CHECKING:
        def signature(self, body: Req, version: int | None = None) -> Resp:
            """For mypy only (see :class:`Sendable`): the parameters and result of a request to this API."""

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def supports(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def _get(self, kind: str, version: int) -> Any:
        key = (kind, version)
        fn = self._cache.get(key)
        if fn is None:
            if not self.supports(version):
                raise ValueError(f"{self.name} v{version} is not supported")
            fields = self.request if kind.startswith("req") else self.response
            flex = self.is_flexible(version)
            direction = "request" if kind.startswith("req") else "response"
            fn = compile_decoder(fields, version, flex) if kind.endswith("dec") else \
                compile_encoder(fields, version, flex, f"{self.name} {direction}")
            self._cache[key] = fn
        return fn

    # The cache holds both kinds of codec (Any); each accessor names its type once (warn_return_any).
    def request_decoder(self, version: int) -> Decoder:
        fn: Decoder | None = self._cache.get(("req_dec", version))  # compiled: no second call (every request)
        if fn is None:
            fn = self._get("req_dec", version)
        return fn

    def request_encoder(self, version: int) -> Encoder:
        fn: Encoder | None = self._cache.get(("req_enc", version))  # compiled: no second call (every request)
        if fn is None:
            fn = self._get("req_enc", version)
        return fn

    def response_decoder(self, version: int) -> Decoder:
        fn: Decoder | None = self._cache.get(("resp_dec", version))  # compiled: no second call (every request)
        if fn is None:
            fn = self._get("resp_dec", version)
        return fn

    def response_encoder(self, version: int) -> Encoder:
        fn: Encoder | None = self._cache.get(("resp_enc", version))  # compiled: no second call (every request)
        if fn is None:
            fn = self._get("resp_enc", version)
        return fn

    def encode_request(self, version: int, body: Req) -> bytes:
        return self._encode(self.request_encoder(version), body)

    def encode_response(self, version: int, body: Resp) -> bytes:
        return self._encode(self.response_encoder(version), body)

    @staticmethod
    def _encode(enc: Encoder, body: Mapping[str, Any]) -> bytes:
        buf = bytearray()
        external: list[tuple[int, Any]] = []
        enc(buf, external, body)
        if external:
            raise ValueError("message has external parts; use the encoder with assemble()")
        return bytes(buf)
