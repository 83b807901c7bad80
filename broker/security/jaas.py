"""The JAAS configuration text Kafka uses in ``sasl.jaas.config``: ``<LoginModule> <flag> key="value" ...;``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPTION_RE = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str]

    def plain_users(self) -> dict[str, str]:
        """The user_<name>="password" options of a PlainLoginModule entry."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas(text: str) -> JaasEntry:
    """Parse one login-module entry (Kafka allows exactly one in sasl.jaas.config); raises ValueError."""
    body = text.strip()
    if not body.endswith(";"):
        raise ValueError("a JAAS entry must end with ';'")
    body = body[:-1].strip()
    head = body.split(None, 2)
    if len(head) < 2:
        raise ValueError("expected '<LoginModule> <flag> options...;'")
    module, flag = head[0], head[1].lower()
    if flag not in FLAGS:
        raise ValueError(f"unknown control flag {head[1]!r} (one of {', '.join(FLAGS)})")
    rest = head[2] if len(head) > 2 else ""
    options: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        if rest[pos:].strip() == "":
            break
        m = _OPTION_RE.match(rest, pos)
        if m is None:
            raise ValueError(f"cannot parse option near {rest[pos:pos + 30]!r}")
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[m.group(1)] = value
        pos = m.end()
    return JaasEntry(module, flag, options)
