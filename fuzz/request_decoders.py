"""Coverage-guided fuzzing (atheris / libFuzzer) of every request decoder and the request header.

    pip install 'atheris>=2.3'          # optional: the `fuzz` extra, a binary wheel on Linux x86_64
    .venv/bin/python fuzz/request_decoders.py -max_total_time=60 -seed_inputs=...   # any libFuzzer flags

The first two input bytes pick the (api, version) among the golden request cases
(tests/unit/protocol/golden), the rest is the body; the golden bodies are the seed corpus. A finding is any
exception other than DecodeError, or a decode that allocates more than the hypothesis tier allows
(tests/unit/protocol/test_fuzz_decoders.py: 64 x the input + 256 KiB). libFuzzer stops at the first finding and
writes the input to ./crash-<sha1>; the exit code is non-zero.
"""

from __future__ import annotations

import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

import atheris

from moldau.protocol.api import REGISTRY
from moldau.protocol.header import decode_request_header
from moldau.protocol.types import DecodeError

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "unit" / "protocol" / "golden"
ALLOC_FACTOR, ALLOC_CONSTANT = 64, 256 * 1024


def _cases() -> list[tuple[int, int, bytes]]:
    seen: dict[tuple[int, int], bytes] = {}
    for path in sorted(GOLDEN.glob("*_request_v*.json")):
        case = json.loads(path.read_text())
        seen.setdefault((case["api_key"], case["api_version"]), bytes.fromhex(case["hex"]))
    return [(k, v, body) for (k, v), body in seen.items()]


CASES = _cases()
DECODERS = [REGISTRY[k].request_decoder(v) for k, v, _ in CASES]
# The decoders are generated at run time by the schema compiler, so instrument_imports() would not see them:
# instrument every function that exists once they are built.
atheris.instrument_all()


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    index = int.from_bytes(data[:2], "big") % (len(CASES) + 1)
    body = memoryview(data[2:])
    tracemalloc.start()
    try:
        try:
            if index == len(CASES):
                decode_request_header(body, data[0] % 3)
            else:
                DECODERS[index](body, 0)
        except DecodeError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if peak > ALLOC_FACTOR * len(body) + ALLOC_CONSTANT:
        raise MemoryError(f"decoding {len(body)} bytes allocated {peak}")


def main() -> None:
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):  # no corpus dir given: seed one from the golden bytes
        corpus = Path(tempfile.mkdtemp(prefix="moldau-fuzz-"))
        for i, (_, _, body) in enumerate(CASES):
            (corpus / f"golden-{i:03d}").write_bytes(i.to_bytes(2, "big") + body)
        args.append(str(corpus))
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
