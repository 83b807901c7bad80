"""Helpers every console tool shares: Kafka's connection flags, ``k=v`` properties, and the one error style.

Every tool reports a failure as one line ``<tool>: error: <message>`` on stderr: exit 2 for a bad command line (the
message names the flag), exit 1 for a failed operation (an unreachable broker, an unknown topic, ...). No exception
class name and no traceback, unless ``--verbose`` is given. Every tool has ``--version``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from moldau.errors import ClientError, KafkaError

EXIT_ERROR = 1
EXIT_USAGE = 2


class ToolError(Exception):
    """A failed operation: printed as one line, exit code 1, no traceback."""


class UsageError(ToolError):
    """A bad command line (the message names the flag): printed as one line, exit code 2."""


def tool_version() -> str:
    try:
        return metadata.version("moldau")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def add_common_flags(parser: argparse.ArgumentParser, verbose: bool = True) -> None:
    """``--version`` and ``--verbose`` (tracebacks on errors), for parsers that are not a ToolParser."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {tool_version()}",
                        help="print the version and exit")
    if verbose:
        parser.add_argument("--verbose", action="store_true", help="print the traceback of an error")


class ToolParser(argparse.ArgumentParser):
    """argparse in the tools' style: a bad flag is one line, ``<prog>: error: <message>``, exit 2 (no usage
    dump). Adds ``--version`` and ``--verbose``; a tool may declare its own ``--verbose`` (it replaces ours)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("conflict_handler", "resolve")
        for key in ("description", "epilog"):  # docstrings use RST ``literals``: --help shows plain text
            if isinstance(kwargs.get(key), str):
                kwargs[key] = kwargs[key].replace("``", "")
        super().__init__(*args, **kwargs)
        add_common_flags(self)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def describe(exc: BaseException) -> str:
    """An exception as the message a user reads: its text, never its class name."""
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, (ClientError, KafkaError)):
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = str(exc).strip()
    if text:
        return text
    if isinstance(exc, TimeoutError):
        return "timed out"
    return "internal error (run with --verbose for the traceback)"


def report_error(prog: str, exc: BaseException, verbose: bool = False) -> None:
    """Prints ``exc`` in the one style (``<prog>: error: <message>``), after its traceback if ``verbose``."""
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    message = "; ".join(line.strip() for line in describe(exc).splitlines() if line.strip())
    print(f"{prog}: error: {message}", file=sys.stderr)


def add_bootstrap(parser: argparse.ArgumentParser, broker_list: bool = False) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="REQUIRED: the server(s) to connect to")
    if broker_list:
        parser.add_argument("--broker-list", metavar="HOST:PORT[,...]",
                            help="DEPRECATED, use --bootstrap-server instead")


def bootstrap_from(args: argparse.Namespace) -> str:
    """The servers from --bootstrap-server (or the deprecated --broker-list); a ToolError when neither is given."""
    servers = getattr(args, "bootstrap_server", None) or getattr(args, "broker_list", None)
    if not servers:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    return str(servers)


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` (each ``--flag k=v``) -> dict; the first '=' splits, so values may contain '='."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag}: expected key=value, got {item!r}")
        out[key.strip()] = value
    return out


def read_properties_file(path: str, flag: str) -> dict[str, str]:
    """A Java properties file (``k=v`` or ``k:v`` lines, ``#``/``!`` comments) as a dict."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ToolError(f"{flag}: {path} line {number}: expected key=value, got {raw!r}")
        out[line[:cut].strip()] = line[cut + 1:].strip()
    return out


def admin_config(args: argparse.Namespace, client_id: str) -> dict[str, Any]:
    """The admin tools' client settings: --bootstrap-server (or its aliases) plus the --command-config file."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap_from(args), "client.id": client_id}
    if args.command_config:
        conf.update(read_properties_file(args.command_config, "--command-config"))
    return conf


def unescape(text: str) -> str:
    """Kafka's console tools take separators like ``\\t`` literally from the shell: decode the common escapes."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def run_tool(main: Callable[[], int], prog: str, argv: Sequence[str] | None = None) -> int:
    """Runs a tool body: every error becomes one line on stderr (exit 2 for usage, 1 otherwise); Ctrl-C exits
    quietly with 130. ``argv`` (default ``sys.argv[1:]``) is only read for ``--verbose``."""
    verbose = "--verbose" in (sys.argv[1:] if argv is None else argv)
    try:
        return main()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0  # stdout closed (piped into head): stop quietly
    except UsageError as exc:
        report_error(prog, exc, verbose)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - a CLI reports, it does not dump a traceback unless asked
        report_error(prog, exc, verbose)
        return EXIT_ERROR
