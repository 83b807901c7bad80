"""Length-prefixed framing: a 4-byte big-endian size followed by that many bytes."""

from __future__ import annotations

from moldau.protocol.types import INT32


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrame(ValueError):
    pass


class FrameDecoder:
    """Feed bytes as they arrive; get back complete frames (without their size prefix).

    The size is checked before any buffering, so a hostile length never makes us allocate.
    """

    __slots__ = ("_buf", "_need", "max_size")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buf = bytearray()
        self._need = -1

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        buf = self._buf
        buf += data
        frames: list[bytearray] = []
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
                break
            # One copy into a frame of its own; writable, so the produce path can patch offsets in place.
            frames.append(buf[pos:pos + self._need])
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)
