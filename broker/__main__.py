"""``moldau-server server.properties [--override key=value ...]``"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.tools.common import ToolParser


class _BrokerIdFilter(logging.Filter):
    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self.broker_id = broker_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.broker_id = self.broker_id
        return True


def setup_logging(broker_id: int, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_BrokerIdFilter(broker_id))
    handler.setFormatter(logging.Formatter(
        "[%(asctime)s] %(levelname)s [broker %(broker_id)s] %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


async def run(config: BrokerConfig) -> int:
    from moldau.broker import exit_watchdog
    from moldau.broker.server import SHUTDOWN_GRACE_S, BrokerServer

    server = BrokerServer(config, owns_process=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except Exception as exc:
        logging.getLogger("moldau.server").error("start-up failed: %s", exc, exc_info=True)
        await server.shutdown()
        return 1
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(server.stop_requested.wait())]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    exit_watchdog.arm(exit_watchdog.shutdown_deadline_s(config, SHUTDOWN_GRACE_S), server.stopped.is_set,
                      server.shutdown_progress)
    await server.shutdown()
    return server.exit_code


def _raise_open_file_limit() -> None:
    """Every segment holds a descriptor and every client a socket: take the hard limit of open files as the soft
    one (Kafka's operators raise it for the same reason)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError) as exc:
        logging.getLogger("moldau.server").warning("cannot raise the open-file limit: %s", exc)


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(prog="moldau-server", description="Run a Moldau broker.")
    parser.add_argument("config", nargs="?", help="server.properties (Kafka's names)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting of the file (may repeat)")
    args = parser.parse_args(argv)
    try:
        config = BrokerConfig.from_sources(args.config, args.override)
    except ConfigError as exc:
        print(f"moldau-server: error: configuration error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"moldau-server: error: cannot read {args.config}: {exc.strerror}", file=sys.stderr)
        return 1
    setup_logging(max(config.broker_id, 0))
    _raise_open_file_limit()
    if config.get("moldau.event.loop") == "uvloop":
        try:
            import uvloop

            return uvloop.run(run(config))
        except ImportError:
            logging.getLogger("moldau.server").warning("uvloop is not installed; using asyncio's event loop")
    return asyncio.run(run(config))


if __name__ == "__main__":
    sys.exit(main())
