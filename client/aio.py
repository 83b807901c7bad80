"""The asyncio API: ``from moldau.aio import Producer, AdminClient`` (and Consumer once present)."""

from moldau.producer import Producer, RecordMetadata

__all__ = ["Producer", "RecordMetadata"]
