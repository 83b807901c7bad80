"""Kafka's ``ssl.principal.mapping.rules`` (KIP-371): the name an SSL client certificate's subject maps to.

The value is a comma-separated list of rules, tried in order on the subject's RFC 2253 distinguished name:

* ``DEFAULT`` — the distinguished name unchanged (the only rule of the default value);
* ``RULE:<regex>/<replacement>/`` with an optional ``L`` or ``U`` after the last slash (lower- or upper-case the
  result). The regex must match the whole name; the replacement is Java's: ``$1``, ``${name}`` refer to groups,
  ``\\x`` is a literal x. Only ``\\`` and ``/`` are special inside a rule, so a regex may contain commas (the
  list is split where a rule ends, not at every comma); ``\\/`` is a slash in the regex or the replacement.

The first rule that matches gives the name; when none does the connection is not authenticated (Kafka fails the
connection). A value Kafka would reject (text that is neither ``DEFAULT`` nor ``RULE:…``, a missing slash,
anything after the case flag) raises ``ValueError``; so does a regex Python cannot compile, a replacement Java
would refuse, and an empty list (it would refuse every certificate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_RULES = "DEFAULT"


class NoMatchingRule(Exception):
    """No rule of the list matches a distinguished name."""


class _Group(NamedTuple):
    """A group reference of a replacement: its number or name."""

    ref: int | str


@dataclass(frozen=True, slots=True)
class Rule:
    text: str  # as written in the configuration, for messages
    pattern: re.Pattern[str] | None = None  # None: the DEFAULT rule
    replacement: tuple[str | _Group, ...] = ()
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        """The mapped name, or None when this rule does not match `dn`."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Kafka replaces every match in the name (Java's replaceAll), not only the whole-name one; re.sub finds
        # the same matches, including a trailing empty one.
        name = self.pattern.sub(self._expand, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name

    def _expand(self, m: re.Match[str]) -> str:
        # A group that took no part in the match adds nothing (as in Java).
        return "".join(p if isinstance(p, str) else (m.group(p.ref) or "") for p in self.replacement)


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    rules: tuple[Rule, ...]

    def name(self, dn: str) -> str:
        """The principal name of a certificate subject; raises NoMatchingRule."""
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"no rule matches {dn!r} (rules: {', '.join(r.text for r in self.rules)})")


DEFAULT_MAPPER = PrincipalMapper((Rule("DEFAULT"),))


def parse_rules(text: str) -> PrincipalMapper:
    """The rules of an ``ssl.principal.mapping.rules`` value; raises ValueError naming the bad rule."""
    s = text.strip()
    rules: list[Rule] = []
    i = 0
    while True:
        i = _skip_space(s, i)
        if i >= len(s):
            break
        if s[i] == ",":  # an empty item (",," or a trailing comma): Kafka ignores it
            i += 1
            continue
        start = i
        if s.startswith("DEFAULT", i):
            i += len("DEFAULT")
            rule = Rule("DEFAULT")
        elif s.startswith("RULE:", i):
            rule, i = _parse_rule(s, i)
        else:
            raise ValueError(f"rule {_item(s, i)!r} is neither DEFAULT nor RULE:<regex>/<replacement>/[LU]")
        end = _skip_space(s, i)
        if end < len(s) and s[end] != ",":
            raise ValueError(f"rule {_item(s, start)!r}: unexpected {_item(s, end)!r} after {s[start:i]!r}")
        rules.append(rule)
        i = end + 1
    if not rules:
        raise ValueError("no rules (every client certificate would be refused); DEFAULT keeps the subject")
    return PrincipalMapper(tuple(rules))


def _skip_space(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _item(s: str, i: int) -> str:
    """The text from `i` up to the next comma, for messages."""
    end = s.find(",", i)
    return s[i:] if end < 0 else s[i:end]


def _parse_rule(s: str, start: int) -> tuple[Rule, int]:
    """``RULE:regex/replacement/[LU]`` at `start`: the rule and the index after it."""
    i = start + len("RULE:")
    regex, i = _until_slash(s, i, start, "regex")
    replacement, i = _until_slash(s, i, start, "replacement")
    case = ""
    if i < len(s) and s[i] in "LU":
        case = s[i]
        i += 1
    text = s[start:i]
    try:
        pattern = re.compile(_python_regex(regex))
    except re.error as exc:
        raise ValueError(f"rule {text!r}: {regex!r} is not a regular expression Moldau can use: {exc}") from None
    return Rule(text, pattern, _parse_replacement(replacement, pattern, text), case), i


def _until_slash(s: str, i: int, start: int, part: str) -> tuple[str, int]:
    """The text up to the next unescaped '/' and the index after that slash."""
    begin = i
    while i < len(s):
        if s[i] == "\\":  # an escaped character, a slash included, belongs to the part
            i += 2
        elif s[i] == "/":
            return s[begin:i], i + 1
        else:
            i += 1
    raise ValueError(f"rule {_item(s, start)!r}: the {part} must end with '/' "
                     "(RULE:<regex>/<replacement>/ with an optional L or U)")


def _python_regex(java: str) -> str:
    """Java's regex syntax where Python's differs in what rules use: named groups ``(?<name>...)``."""
    out: list[str] = []
    i = 0
    while i < len(java):
        if java[i] == "\\":
            out.append(java[i:i + 2])
            i += 2
        elif java.startswith("(?<", i) and i + 3 < len(java) and java[i + 3] not in "=!":
            out.append("(?P<")  # not a look-behind: a named group
            i += 3
        else:
            out.append(java[i])
            i += 1
    return "".join(out)


def _parse_replacement(text: str, pattern: re.Pattern[str], rule: str) -> tuple[str | _Group, ...]:
    """Java's replacement syntax as literal strings and group references.

    ``$`` + digits: the first digit is a group number and each further digit is taken while the number stays a
    group of the regex (Java). A first digit above the regex's group count is literal text when the regex has
    groups (Kafka escapes it); a regex without groups fails every match in Kafka, so that is refused here."""
    parts: list[str | _Group] = []
    literal: list[str] = []
    i = 0

    def ref(group: int | str) -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()
        parts.append(_Group(group))

    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise ValueError(f"rule {rule!r}: the replacement ends with a lone backslash")
            literal.append(text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1] == "{":
            end = text.find("}", i)
            name = text[i + 2:end] if end > 0 else ""
            if not name or name not in pattern.groupindex:
                raise ValueError(f"rule {rule!r}: the replacement refers to a group the regex does not name")
            ref(name)
            i = end + 1
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            number, j = int(text[i + 1]), i + 2
            if number > pattern.groups and pattern.groups > 0:
                literal.append("$")
                i += 1
                continue
            if number > pattern.groups:
                raise ValueError(f"rule {rule!r}: the replacement refers to group {number} but the regex has none")
            while j < len(text) and text[j].isdigit() and number * 10 + int(text[j]) <= pattern.groups:
                number, j = number * 10 + int(text[j]), j + 1
            ref(number)
            i = j
        elif c == "$":
            raise ValueError(f"rule {rule!r}: '$' in the replacement must be followed by a group number or "
                             "{name} (write \\$ for a dollar sign)")
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append("".join(literal))
    return tuple(parts)
