"""A remote storage manager over S3-compatible object storage (AWS S3, MinIO, Ceph RGW, moto...).

Objects: ``<prefix><topic>-<partition>/<start offset, 20 digits>-<segment id>.<kind>`` as in the filesystem
backend. The ``.log`` goes up in a multipart upload (``rsm.config.s3.multipart.part.size`` bytes a part, 8 MiB by
default; one PUT when smaller) after the indexes, so a segment whose ``.log`` exists is complete; reads are ranged
GETs. Settings (broker properties ``rsm.config.s3.*``): ``bucket`` (required), ``endpoint.url`` (default AWS),
``region`` (us-east-1), ``access.key.id`` / ``secret.access.key`` (else the usual AWS credential chain),
``prefix``, ``path.style.access`` (true for MinIO/moto-style endpoints), ``multipart.part.size``,
``api.call.attempt.timeout`` (ms, 30000: one attempt's connect and read bound; three attempts per call).

Why botocore (through boto3): the storage manager contract blocks (as Kafka's), and the broker calls it only from
its remote-log threads, never on the event loop; botocore's client is thread-safe, does SigV4, retries with
backoff and multipart uploads, and is the reference S3 client. An asyncio client (aiobotocore) would need an
event loop of its own inside those threads and pins botocore to narrow versions.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, cast

from moldau.storage.checkpoint import leader_epochs_text
from moldau.storage.remote.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)

DEFAULT_PART_SIZE = 8 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's smallest part (except the last)
DEFAULT_ATTEMPT_TIMEOUT_MS = 30_000
_NOT_FOUND = ("NoSuchKey", "404", "NotFound", "NoSuchBucket")


class _Body(Protocol):
    def read(self) -> bytes: ...


class _S3Client(Protocol):
    """The botocore client calls used here (botocore is untyped)."""

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> object: ...
    def get_object(self, *, Bucket: str, Key: str, Range: str = ...) -> Mapping[str, object]: ...
    def delete_objects(self, *, Bucket: str, Delete: Mapping[str, object]) -> object: ...
    def create_multipart_upload(self, *, Bucket: str, Key: str) -> Mapping[str, object]: ...
    def upload_part(self, *, Bucket: str, Key: str, UploadId: str, PartNumber: int,
                    Body: bytes) -> Mapping[str, object]: ...
    def complete_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str,
                                  MultipartUpload: Mapping[str, object]) -> object: ...
    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> object: ...
    def head_bucket(self, *, Bucket: str) -> object: ...
    def create_bucket(self, *, Bucket: str) -> object: ...


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error")
        if isinstance(error, dict):
            return str(error.get("Code", ""))
    return ""


class S3RemoteStorageManager:
    def __init__(self) -> None:
        self.bucket = ""
        self.prefix = ""
        self.part_size = DEFAULT_PART_SIZE
        self._client: _S3Client | None = None
        self._lock = threading.Lock()
        self._bucket_pending = False  # s3.create.bucket, not done yet (the store was unreachable at start)

    def configure(self, configs: Mapping[str, str]) -> None:
        import boto3  # only when the S3 backend is used (extra "s3")
        from botocore.config import Config

        self.bucket = configs.get("s3.bucket", "")
        if not self.bucket:
            raise ValueError("the s3 remote storage manager needs rsm.config.s3.bucket")
        self.prefix = configs.get("s3.prefix", "")
        self.part_size = max(int(configs.get("s3.multipart.part.size", DEFAULT_PART_SIZE)), MIN_PART_SIZE)
        # One attempt's bound (as the Kafka S3 plugins' s3.api.call.attempt.timeout): a store that stops answering
        # fails the call after its three attempts, each bounded by this, and frees the remote-log thread.
        attempt_s = int(configs.get("s3.api.call.attempt.timeout", DEFAULT_ATTEMPT_TIMEOUT_MS)) / 1000
        if attempt_s <= 0:
            raise ValueError("rsm.config.s3.api.call.attempt.timeout must be positive (milliseconds)")
        style = "path" if configs.get("s3.path.style.access", "false").lower() == "true" else "auto"
        self._client = cast(_S3Client, boto3.session.Session().client(
            "s3", endpoint_url=configs.get("s3.endpoint.url") or None,
            region_name=configs.get("s3.region", "us-east-1"),
            aws_access_key_id=configs.get("s3.access.key.id") or None,
            aws_secret_access_key=configs.get("s3.secret.access.key") or None,
            config=Config(s3={"addressing_style": style}, retries={"max_attempts": 3, "mode": "standard"},
                          connect_timeout=min(5.0, attempt_s), read_timeout=attempt_s,
                          max_pool_connections=32)))
        self._bucket_pending = configs.get("s3.create.bucket", "false").lower() == "true"
        try:
            self._ensure_bucket()
        except Exception:  # the store is down: the first copy tries again
            pass

    def _ensure_bucket(self) -> None:
        if not self._bucket_pending:
            return
        client = self._s3()
        try:
            client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            if _error_code(exc) not in _NOT_FOUND:
                raise
            client.create_bucket(Bucket=self.bucket)
        self._bucket_pending = False

    def _s3(self) -> _S3Client:
        if self._client is None:
            raise RemoteStorageError("s3 remote storage manager not configured")
        return self._client

    def _key(self, metadata: RemoteLogSegmentMetadata, kind: str) -> str:
        sid = metadata.segment_id
        return f"{self.prefix}{sid.topic}-{sid.partition}/{metadata.start_offset:020d}-{sid.id}{kind}"

    # ------------------------------------------------------------------ writes
    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        try:
            self._ensure_bucket()
            for kind, src in ((IndexType.OFFSET.value, data.offset_index), (IndexType.TIMESTAMP.value,
                              data.time_index), (IndexType.TRANSACTION.value, data.transaction_index),
                              (IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot)):
                body = src.read_bytes() if src is not None else b""
                self._s3().put_object(Bucket=self.bucket, Key=self._key(metadata, kind), Body=body)
            self._s3().put_object(Bucket=self.bucket, Key=self._key(metadata, IndexType.LEADER_EPOCH.value),
                                  Body=leader_epochs_text(data.leader_epochs).encode())
            self._upload(self._key(metadata, ".log"), data.log_segment)
        except RemoteStorageError:
            raise
        except Exception as exc:  # botocore's ClientError, connection errors, OSError reading the local files
            raise RemoteStorageError(f"copying {metadata.segment_id} to s3://{self.bucket}: {exc}") from exc

    def _upload(self, key: str, path: Path) -> None:
        client = self._s3()
        size = path.stat().st_size
        if size <= self.part_size:
            client.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
            return
        upload = client.create_multipart_upload(Bucket=self.bucket, Key=key)
        upload_id = str(upload["UploadId"])
        parts: list[dict[str, object]] = []
        try:
            with open(path, "rb") as f:
                number = 1
                while chunk := f.read(self.part_size):
                    answer = client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                PartNumber=number, Body=chunk)
                    parts.append({"ETag": answer["ETag"], "PartNumber": number})
                    number += 1
            client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                             MultipartUpload={"Parts": parts})
        except BaseException:
            try:
                client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            except Exception:  # the store is down: its lifecycle rules remove the upload's parts
                pass
            raise

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        keys = [self._key(metadata, ".log")] + [self._key(metadata, k.value) for k in IndexType]
        try:  # the .log first, in the same request: S3 deletes keys in the order given, a missing key is fine
            self._s3().delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys],
                                                                   "Quiet": True})
        except Exception as exc:
            if _error_code(exc) in _NOT_FOUND:  # no bucket (yet): nothing of the segment is there
                return
            raise RemoteStorageError(f"deleting {metadata.segment_id} from s3://{self.bucket}: {exc}") from exc

    # ------------------------------------------------------------------ reads
    def _get(self, metadata: RemoteLogSegmentMetadata, key: str, byte_range: str | None) -> bytes:
        try:
            if byte_range is None:
                answer = self._s3().get_object(Bucket=self.bucket, Key=key)
            else:
                answer = self._s3().get_object(Bucket=self.bucket, Key=key, Range=byte_range)
            return cast(_Body, answer["Body"]).read()
        except Exception as exc:
            code = _error_code(exc)
            if code in _NOT_FOUND:
                raise RemoteResourceNotFoundError(f"s3://{self.bucket}/{key} not found") from None
            if code == "InvalidRange":
                return b""
            raise RemoteStorageError(f"reading s3://{self.bucket}/{key} of {metadata.segment_id}: {exc}") from exc

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        if end_position is not None and end_position < start_position:
            return b""
        byte_range = f"bytes={start_position}-" + ("" if end_position is None else str(end_position))
        return self._get(metadata, self._key(metadata, ".log"), byte_range)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._get(metadata, self._key(metadata, index_type.value), None)

    def close(self) -> None:
        with self._lock:
            self._client = None

