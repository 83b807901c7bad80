"""Tiered storage (KIP-405): the remote storage manager interface, its backends and remote log metadata.

Everything here is synchronous file or network I/O without asyncio; the broker calls it from its remote-log
threads (``remote.log.reader.threads`` and the copy task).
"""
