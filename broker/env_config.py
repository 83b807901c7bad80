"""Broker settings from ``MOLDAU_<SETTING>`` environment variables, the way the common Kafka images read
``KAFKA_<SETTING>``: the container entry point (``python -m moldau.broker.env_config [server.properties]``).

Name mapping (Confluent's convention for its Kafka images): drop ``MOLDAU_``, lower-case, then ``___`` -> ``-``,
``__`` -> ``_``, ``_`` -> ``.``. So ``MOLDAU_BROKER_ID`` is ``broker.id``, ``MOLDAU_ZOOKEEPER_CONNECT`` is
``zookeeper.connect`` and ``MOLDAU_LOG_RETENTION_MS`` is ``log.retention.ms``. A variable that names no broker
setting is an error naming the variable (a typo must not be silently ignored). Variables in ``RESERVED`` steer the
entry point itself. The settings become ``--override key=value`` arguments of ``moldau-server``, so they win over
the properties file, and every value is validated by the broker's own configuration code.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from moldau.broker.config import SETTINGS

PREFIX = "MOLDAU_"
# Not broker settings: the entry point's own (the properties file), and the dev scripts' virtualenv path.
RESERVED = frozenset({"MOLDAU_CONFIG_FILE", "MOLDAU_VENV"})
DEFAULT_CONFIG_FILE = "/etc/moldau/server.properties"


class EnvConfigError(ValueError):
    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(f"{variable}: {reason}")
        self.variable = variable


def setting_name(variable: str) -> str:
    """``MOLDAU_LOG_RETENTION_MS`` -> ``log.retention.ms`` (``___`` -> ``-``, ``__`` -> ``_``, ``_`` -> ``.``)."""
    if not variable.startswith(PREFIX) or len(variable) == len(PREFIX):
        raise EnvConfigError(variable, f"not a {PREFIX}<SETTING> variable")
    body = variable[len(PREFIX):].lower()
    # Placeholders that contain no '_' keep the longer runs from being split by the shorter replacements.
    body = body.replace("___", "\0").replace("__", "\1").replace("_", ".")
    return body.replace("\0", "-").replace("\1", "_")


def settings_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Every ``MOLDAU_<SETTING>`` variable as ``{setting: value}``, sorted by name; unknown settings are errors."""
    out: dict[str, str] = {}
    for variable in sorted(environ):
        if not variable.startswith(PREFIX) or variable in RESERVED:
            continue
        name = setting_name(variable)
        if name not in SETTINGS:
            raise EnvConfigError(variable, f"'{name}' is not a broker setting (see docs/configuration.md)")
        out[name] = environ[variable]
    return out


def server_command(environ: Mapping[str, str], argv: list[str]) -> list[str]:
    """The ``moldau-server`` command line: the properties file (argv's first non-option or $MOLDAU_CONFIG_FILE),
    the environment's settings as overrides, then argv's own options (which come last, so they win)."""
    config = environ.get("MOLDAU_CONFIG_FILE", DEFAULT_CONFIG_FILE)
    rest = list(argv)
    if rest and not rest[0].startswith("-"):
        config = rest.pop(0)
    cmd = ["moldau-server", config]
    for name, value in settings_from_env(environ).items():
        cmd += ["--override", f"{name}={value}"]
    return cmd + rest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--print"]:  # show what would run (for `docker run ... --print` and for debugging)
        try:
            print(" ".join(server_command(os.environ, args[1:])))
        except EnvConfigError as exc:
            print(f"moldau: configuration error: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        cmd = server_command(os.environ, args)
    except EnvConfigError as exc:
        print(f"moldau: configuration error: {exc}", file=sys.stderr)
        return 1
    exe = shutil.which(cmd[0]) or cmd[0]
    os.execv(exe, cmd)  # the broker replaces this process: it is the container's PID 1 and gets its signals


if __name__ == "__main__":
    sys.exit(main())
