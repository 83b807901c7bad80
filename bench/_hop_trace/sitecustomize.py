"""Hop timestamps for bench/hop_map.py, loaded into the brokers it starts (PYTHONPATH puts this directory first,
so Python imports this ``sitecustomize`` at start-up). Without MOLDAU_HOP_TRACE set it does nothing; the
brokers' own code carries no instrumentation.

With it set, a few methods on a replication round trip's way are wrapped to record (CLOCK_MONOTONIC ns, label,
value) into a list that a daemon thread appends to ``$MOLDAU_HOP_TRACE.<pid>`` every 0.3 s. CLOCK_MONOTONIC is
system-wide, so the three brokers' and the bench's timestamps compare directly. A wrapper costs ~1 us.
"""

from __future__ import annotations

import os

PATH = os.environ.get("MOLDAU_HOP_TRACE")


def _install(path: str) -> None:
    import threading
    import time

    buf: list[tuple[int, str, int]] = []
    ns = time.monotonic_ns

    def mark(label: str, value: int = 0) -> None:
        buf.append((ns(), label, value))

    def flush_forever() -> None:
        out = f"{path}.{os.getpid()}"
        while True:
            time.sleep(0.3)
            if not buf:
                continue
            taken = buf[:]
            del buf[:len(taken)]
            with open(out, "a") as f:
                f.write("".join(f"{t} {label} {v}\n" for t, label, v in taken))

    threading.Thread(target=flush_forever, daemon=True, name="hop-trace").start()

    from moldau.broker import network, replica_fetcher, replica_manager
    from moldau.broker.apis import fetch, produce
    from moldau.connection import BrokerConnection

    def fetcher_id(frame: bytes | bytearray) -> int:
        head = bytes(frame[:96])
        at = head.find(b"broker-")
        if at < 0 or b"-fetcher" not in head:
            return -1
        digits = head[at + 7:head.find(b"-", at + 7)]
        return int(digits) if digits.isdigit() else -1

    conn_cls = network.Connection
    orig_handle_frame = conn_cls._handle_frame

    def handle_frame(self, frame):  # type: ignore[no-untyped-def]
        key = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
        if key == 1:
            self._hop_peer = fetcher_id(frame)
            mark("L.recv_fetch", self._hop_peer)
        elif key == 0:
            mark("L.recv_produce", 0)
        return orig_handle_frame(self, frame)

    conn_cls._handle_frame = handle_frame

    orig_write_response = conn_cls._write_response

    async def write_response(self, request):  # type: ignore[no-untyped-def]
        key = request.api_key
        peer = getattr(self, "_hop_peer", -1)
        if key == 1:
            mark("L.fetch_answer_start", peer)
        await orig_write_response(self, request)
        if key == 1:
            mark("L.fetch_answer_sent", peer)

    conn_cls._write_response = write_response

    orig_send_bytes = conn_cls._send_bytes

    async def send_bytes(self, data):  # type: ignore[no-untyped-def]
        mark("L.produce_answer_start", len(data))
        await orig_send_bytes(self, data)
        mark("L.produce_answer_sent", len(data))

    conn_cls._send_bytes = send_bytes

    orig_send_now = getattr(conn_cls, "_send_now", None)
    if orig_send_now is not None:  # answers written in the call that made them
        def send_now(self, data):  # type: ignore[no-untyped-def]
            peer = getattr(self, "_hop_peer", -1)
            kind = "fetch" if peer >= 0 else "produce"
            mark(f"L.{kind}_answer_start", peer if peer >= 0 else len(data))
            rest = orig_send_now(self, data)
            mark(f"L.{kind}_answer_sent", peer if peer >= 0 else len(data))
            return rest

        conn_cls._send_now = send_now

    rm_cls = replica_manager.ReplicaManager
    orig_append = rm_cls.append

    def append(self, topic, index, records, acks=1):  # type: ignore[no-untyped-def]
        mark("L.append_start", index)
        r = orig_append(self, topic, index, records, acks)
        mark("L.append_done", r.base_offset)
        return r

    rm_cls.append = append

    orig_update = rm_cls.update_follower

    def update_follower(self, topic, index, replica_id, fetch_offset, *args, **kw):  # type: ignore[no-untyped-def]
        p = self.partitions.get((topic, index))
        hw = p.high_watermark if p is not None else -1
        orig_update(self, topic, index, replica_id, fetch_offset, *args, **kw)
        if p is not None and p.high_watermark != hw:
            mark("L.hw_moved", replica_id)

    rm_cls.update_follower = update_follower

    df = fetch.DelayedFetch
    orig_check = df._check

    def check(self):  # type: ignore[no-untyped-def]
        mark("L.fetch_check", self.body["replica_id"])
        orig_check(self)

    df._check = check

    dp = produce.DelayedProduce
    orig_on_complete = dp.on_complete

    def on_complete(self):  # type: ignore[no-untyped-def]
        mark("L.produce_complete", 0)
        orig_on_complete(self)

    dp.on_complete = on_complete

    from moldau.broker import handler_pool
    pool_cls = handler_pool.HandlerPool
    orig_handle_timed = pool_cls.handle_timed

    def handle_timed(self, request):  # type: ignore[no-untyped-def]
        key = request.api_key
        if key in (0, 1):
            mark("L.handle_start", key)
            orig_handle_timed(self, request)
            mark("L.handle_done", key)
        else:
            orig_handle_timed(self, request)

    pool_cls.handle_timed = handle_timed

    fetcher_cls = replica_fetcher.Fetcher
    orig_on_partition = fetcher_cls._on_partition

    def on_partition(self, tp, st, p, error):  # type: ignore[no-untyped-def]
        records = p.get("records")
        n = len(records) if records is not None else 0
        if n:
            mark("F.append_start", self.source)
        r = orig_on_partition(self, tp, st, p, error)
        if n:
            mark("F.append_done", self.source)
        return r

    fetcher_cls._on_partition = on_partition

    def fetcher_reads(orig):  # type: ignore[no-untyped-def]
        """``orig`` (bytes handed to the decoder) marked around its call on a replica fetcher's connection."""

        def traced(self, arg):  # type: ignore[no-untyped-def]
            if not self.client_id.endswith("-fetcher"):
                return orig(self, arg)
            mark("F.data", self.port)
            orig(self, arg)
            mark("F.decoded", self.port)

        return traced

    BrokerConnection._on_data = fetcher_reads(BrokerConnection._on_data)
    # the rest of a large answer, read in place
    BrokerConnection._on_filled = fetcher_reads(BrokerConnection._on_filled)

    orig_write_request = BrokerConnection._write_request

    def write_request(self, api, body, version, future):  # type: ignore[no-untyped-def]
        cid = orig_write_request(self, api, body, version, future)
        if api.key == 1 and self.client_id.endswith("-fetcher"):
            mark("F.fetch_sent", self.port)
        return cid

    BrokerConnection._write_request = write_request


if PATH:
    _install(PATH)
