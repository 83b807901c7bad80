"""Kafka's on-disk log layout: segments, indexes, partition logs and the log manager (synchronous file I/O)."""

from moldau.storage.config import Clock, LogConfig, ManualClock, SystemClock
from moldau.storage.log import AppendInfo, FetchData, Log
from moldau.storage.log_manager import LogManager
from moldau.storage.segment import FileRegion, LogSegment

__all__ = [
    "AppendInfo",
    "Clock",
    "FetchData",
    "FileRegion",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "ManualClock",
    "SystemClock",
]
