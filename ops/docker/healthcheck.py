"""Container health: the broker's first listener accepts a connection and its /metrics endpoint answers.
Ports come from MOLDAU_LISTENERS / MOLDAU_METRICS_PORT when set, else the image defaults (9092, 9404)."""

import os
import socket
import sys
import urllib.request


def first_listener_port() -> int:
    listeners = os.environ.get("MOLDAU_LISTENERS", "PLAINTEXT://:9092")
    return int(listeners.split(",")[0].rsplit(":", 1)[1])


def main() -> int:
    try:
        with socket.create_connection(("127.0.0.1", first_listener_port()), timeout=3):
            pass
        metrics = int(os.environ.get("MOLDAU_METRICS_PORT", "9404"))
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=3) as response:
            response.read(1)
    except OSError as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
