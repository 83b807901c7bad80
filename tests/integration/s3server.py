"""A real S3-API server for the tiered-storage tests: moto's server mode (``python -m moto.server``), a separate
process on 127.0.0.1 installed from PyPI with the test dependencies. Chosen over s3rver (npm: a Node runtime the
suite does not otherwise need) and MinIO (in none of the registries we reach); moto implements multipart uploads
and ranged GETs as S3 does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .harness import _die_with_parent, free_port, port_accepts, wait_until


@dataclass
class S3Server:
    port: int
    proc: subprocess.Popen[bytes] | None
    log_path: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rsm_config(self, bucket: str) -> dict[str, str]:
        """The broker's rsm.config.* settings for this server (prefix included)."""
        return {"rsm.config.s3.endpoint.url": self.endpoint, "rsm.config.s3.bucket": bucket,
                "rsm.config.s3.access.key.id": "test", "rsm.config.s3.secret.access.key": "test",
                "rsm.config.s3.path.style.access": "true", "rsm.config.s3.create.bucket": "true"}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_s3_server(log_path: Path, port: int | None = None) -> S3Server:
    """Starts moto's server (on ``port``, else a free one) and waits until it listens; the caller stops it."""
    port = free_port() if port is None else port
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent,
                                env=dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test"))
    server = S3Server(port, proc, log_path)
    try:
        wait_until(lambda: port_accepts(port) or proc.poll() is not None, 60, "moto's S3 server to listen")
        assert proc.poll() is None, log_path.read_text(errors="replace")[-2000:]
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture
def s3_server(tmp_path: Path) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path / "moto.log")
    try:
        yield server
    finally:
        server.stop()
