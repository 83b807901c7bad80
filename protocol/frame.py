"""Length-prefixed framing: a 4-byte big-endian size followed by that many bytes."""

from __future__ import annotations

from moldau.protocol.types import INT32

# A frame of at least this many bytes gets a buffer of its own as soon as its size prefix is read (see FrameDecoder).
DIRECT_AT = 256 * 1024


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrame(ValueError):
    pass


class FrameDecoder:
    """Feed bytes as they arrive; get back complete frames (without their size prefix), each a writable
    ``bytearray`` of its own (the produce path patches offsets in place).

    The size is checked before any buffering, so a hostile length never makes us allocate more than ``max_size``.
    A frame of at least ``direct_at`` bytes (a fetch answer of megabytes) gets its buffer when its size prefix is
    read, as Kafka's client does, and its bytes go straight into place: copied there by ``feed``, or received
    there by a caller that asks for ``rest()`` and reports ``filled(n)`` (client/connection.py's buffered
    protocol), instead of gathering in the decoder's buffer to be sliced out once complete (two copies more of
    every byte and fresh pages for both buffers: ~8 ms against ~3 ms of CPU per 8 MB answer). ``buffered``
    counts such a buffer whole from its allocation. The broker's decoder has ``direct_at=None``: a client's
    announced size costs it nothing until the bytes come (tests/integration/test_hostile_input.py).
    """

    __slots__ = ("_buf", "_need", "max_size", "direct_at", "_frame", "_got")

    def __init__(self, max_size: int, direct_at: int | None = DIRECT_AT) -> None:
        self.max_size = max_size
        # None: never (the broker's connections: its memory follows what a client sent, not what it announced)
        self.direct_at = direct_at
        self._buf = bytearray()
        self._need = -1
        self._frame: bytearray | None = None  # a large frame being received in place; the buffer is empty then
        self._got = 0  # its bytes received so far

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        frames: list[bytearray] = []
        rest = self.rest()
        if rest is not None:
            taken = min(len(data), len(rest))
            with memoryview(data) as view, rest:
                rest[:taken] = view[:taken]
                frames = self.filled(taken)
                if not frames or taken == len(data):
                    return frames
                self._buf += view[taken:]
        else:
            self._buf += data
        buf = self._buf
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                size = INT32.unpack_from(buf, pos)[0]
                if size < 0:
                    raise InvalidFrame(f"negative frame size {size}")
                if size > self.max_size:
                    raise FrameTooLarge(size, self.max_size)
                self._need = size
                pos += 4
            if end - pos < self._need:
                if self.direct_at is not None and self._need >= self.direct_at:
                    # its own buffer now; the rest of its bytes go into place
                    frame = bytearray(self._need)
                    frame[:end - pos] = buf[pos:end]
                    self._frame, self._got, self._need = frame, end - pos, -1
                    pos = end
                break
            # One copy into a frame of its own; writable, so the produce path can patch offsets in place.
            frames.append(buf[pos:pos + self._need])
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames

    def rest(self) -> memoryview | None:
        """The part still to come of the large frame being received (see the class), for the caller to receive
        into and then report with ``filled``; None when there is none. While the view lives the frame cannot be
        resized (frames never are: the produce path only patches bytes in place)."""
        return None if self._frame is None else memoryview(self._frame)[self._got:]

    def filled(self, n: int) -> list[bytearray]:
        """``n`` bytes were written into ``rest()``: the frame once it is complete (else nothing)."""
        frame = self._frame
        if frame is None or n < 0 or self._got + n > len(frame):
            raise ValueError(f"filled({n}) without room for it")
        self._got += n
        if self._got < len(frame):
            return []
        self._frame = None
        return [frame]

    @property
    def buffered(self) -> int:
        """Bytes held for frames not yet complete (a large frame's buffer whole, from its allocation)."""
        return len(self._buf) if self._frame is None else len(self._frame)
