"""The launcher names the dashboard URLs when a Prometheus (and Grafana) answers (in-process HTTP servers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from moldau.broker.launcher import GRAFANA_DASHBOARD_UID, dashboard_lines


@contextmanager
def serving(ok_path: str) -> Iterator[str]:
    """An HTTP server answering 200 on `ok_path`, 404 elsewhere; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            self.send_response(200 if self.path == ok_path else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_no_prometheus_no_lines() -> None:
    with serving("/nothing") as url:  # answers, but not Prometheus' readiness endpoint
        assert dashboard_lines(url, url) == []


def test_prometheus_and_grafana_urls() -> None:
    with serving("/-/ready") as prom, serving("/api/health") as grafana:
        lines = dashboard_lines(prom + "/", grafana)
    assert lines == [f"  Prometheus:       {prom}/targets (scrapes), {prom}/alerts (alert rules)",
                     f"  Grafana:          {grafana}/d/{GRAFANA_DASHBOARD_UID} (dashboard \"Moldau cluster\")"]


def test_prometheus_without_grafana() -> None:
    with serving("/-/ready") as prom, serving("/nothing") as other:
        lines = dashboard_lines(prom, other)
    assert len(lines) == 1 and lines[0].startswith("  Prometheus:") and f"{prom}/targets" in lines[0]


def test_dashboard_uid_is_the_shipped_dashboard() -> None:
    import json
    from pathlib import Path

    dashboard = Path(__file__).resolve().parents[3] / "ops" / "grafana" / "dashboards" / "moldau.json"
    assert json.loads(dashboard.read_text())["uid"] == GRAFANA_DASHBOARD_UID
