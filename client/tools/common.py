"""Helpers every console tool shares: Kafka's connection flags, ``k=v`` properties, one-line errors (exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from moldau.errors import ClientError, KafkaError

EXIT_ERROR = 1


class ToolError(Exception):
    """Bad input or a failed operation: printed as one line, exit code 1, no traceback."""


class ToolParser(argparse.ArgumentParser):
    """argparse with Kafka's behaviour on bad flags: one line naming the problem, exit 1 (not argparse's 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"Error: {message}", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def fail(message: str) -> NoReturn:
    print(f"Error: {message}", file=sys.stderr)
    sys.exit(EXIT_ERROR)


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
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    return str(servers)


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` (each ``--flag k=v``) -> dict; the first '=' splits, so values may contain '='."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"{flag}: expected key=value, got {item!r}")
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


def run_tool(main: Callable[[], int]) -> int:
    """Runs a tool body: known errors become one line on stderr and exit 1; Ctrl-C exits quietly."""
    try:
        return main()
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
    except KafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr)
    except ClientError as exc:  # ConfigError names its key
        print(f"Error: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"Error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return EXIT_ERROR
