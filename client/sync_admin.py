"""The blocking AdminClient (``from moldau import AdminClient``): every method of :class:`moldau.aio.AdminClient`,
spelled out with its types, run to completion on the client loop (client/loop_thread.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from moldau import admin as _admin
from moldau.admin import ClusterDescription, NewTopic, OffsetResult, TopicDescription
from moldau.admin_acls import AclBinding, AclBindingFilter
from moldau.admin_configs import AlterConfigOp, ConfigEntry, ConfigResource
from moldau.admin_groups import ConsumerGroupDescription, ConsumerGroupListing
from moldau.admin_quotas import QuotaEntity
from moldau.admin_txn import ProducerState, TransactionDescription, TransactionListing
from moldau.cluster import Cluster
from moldau.config import ClientConfig
from moldau.errors import KafkaError
from moldau.fetcher import TopicPartition as ConsumerTopicPartition
from moldau.group import OffsetAndMetadata
from moldau.loop_thread import background_loop, run
from moldau.partition_admin import LogDirDescription, NewPartitions
from moldau.protocol.types import TopicPartition


class AdminClient:
    """Blocking AdminClient; settings by Kafka names (dict) or as keyword arguments. Each method raises
    :class:`KafkaError` for the first failed item unless ``raise_errors=False`` (then: per-item errors)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        background_loop()
        self._aio = _admin.AdminClient(config, **kwargs)
        run(self._aio.start(), what="AdminClient()")

    @property
    def aio(self) -> _admin.AdminClient:
        """The async admin client underneath (use it only from the client loop)."""
        return self._aio

    @property
    def config(self) -> ClientConfig:
        return self._aio.config

    @property
    def cluster(self) -> Cluster:
        return self._aio.cluster

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        run(self._aio.close(), what="close")

    # ------------------------------------------------------------------ topics and cluster
    def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False, timeout_ms: int = 60000,
                      raise_errors: bool = True) -> dict[str, KafkaError | None]:
        return run(self._aio.create_topics(list(topics), validate_only=validate_only, timeout_ms=timeout_ms,
                                           raise_errors=raise_errors), what="create_topics")

    def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 60000,
                      raise_errors: bool = True) -> dict[str, KafkaError | None]:
        return run(self._aio.delete_topics(list(names), timeout_ms=timeout_ms, raise_errors=raise_errors),
                   what="delete_topics")

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        return run(self._aio.list_topics(include_internal=include_internal), what="list_topics")

    def describe_topics(self, names: Iterable[str] | None = None, *,
                        raise_errors: bool = True) -> list[TopicDescription]:
        return run(self._aio.describe_topics(None if names is None else list(names), raise_errors=raise_errors),
                   what="describe_topics")

    def describe_cluster(self) -> ClusterDescription:
        return run(self._aio.describe_cluster(), what="describe_cluster")

    def list_offsets(self, requests: Mapping[tuple[str, int], int | str], *,
                     raise_errors: bool = True) -> dict[tuple[str, int], OffsetResult | KafkaError]:
        return run(self._aio.list_offsets(dict(requests), raise_errors=raise_errors), what="list_offsets")

    # ------------------------------------------------------------------ partitions and records
    def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions], *, validate_only: bool = False,
                          timeout_ms: int = 60000, raise_errors: bool = True) -> dict[str, KafkaError | None]:
        return run(self._aio.create_partitions(dict(new_partitions), validate_only=validate_only,
                                               timeout_ms=timeout_ms, raise_errors=raise_errors),
                   what="create_partitions")

    def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = 60000,
                       raise_errors: bool = True) -> dict[TopicPartition, int | KafkaError]:
        return run(self._aio.delete_records(dict(offsets), timeout_ms=timeout_ms, raise_errors=raise_errors),
                   what="delete_records")

    def elect_leaders(self, election_type: str | int = "preferred", partitions: Iterable[TopicPartition] | None = None,
                      *, timeout_ms: int = 60000, raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        return run(self._aio.elect_leaders(election_type, None if partitions is None else list(partitions),
                                           timeout_ms=timeout_ms, raise_errors=raise_errors), what="elect_leaders")

    def describe_log_dirs(self, brokers: Iterable[int] | None = None, topics: Mapping[str, Iterable[int]] | None = None,
                          ) -> dict[int, list[LogDirDescription]]:
        return run(self._aio.describe_log_dirs(None if brokers is None else list(brokers),
                                               None if topics is None else dict(topics)), what="describe_log_dirs")

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, list[int] | None], *,
                                      timeout_ms: int = 60000, raise_errors: bool = True,
                                      ) -> dict[TopicPartition, KafkaError | None]:
        return run(self._aio.alter_partition_reassignments(dict(reassignments), timeout_ms=timeout_ms,
                                                           raise_errors=raise_errors),
                   what="alter_partition_reassignments")

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None, *,
                                     timeout_ms: int = 60000,
                                     ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        return run(self._aio.list_partition_reassignments(None if partitions is None else list(partitions),
                                                          timeout_ms=timeout_ms), what="list_partition_reassignments")

    # ------------------------------------------------------------------ configs
    def describe_configs(self, resources: Iterable[ConfigResource], *, keys: Iterable[str] | None = None,
                         include_synonyms: bool = True, include_documentation: bool = False,
                         raise_errors: bool = True) -> dict[ConfigResource, list[ConfigEntry] | KafkaError]:
        return run(self._aio.describe_configs(list(resources), keys=None if keys is None else list(keys),
                                              include_synonyms=include_synonyms,
                                              include_documentation=include_documentation,
                                              raise_errors=raise_errors), what="describe_configs")

    def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool = False,
                      raise_errors: bool = True) -> dict[ConfigResource, KafkaError | None]:
        return run(self._aio.alter_configs(dict(configs), validate_only=validate_only, raise_errors=raise_errors),
                   what="alter_configs")

    def incremental_alter_configs(self, ops: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
                                  validate_only: bool = False,
                                  raise_errors: bool = True) -> dict[ConfigResource, KafkaError | None]:
        return run(self._aio.incremental_alter_configs({r: list(o) for r, o in ops.items()},
                                                       validate_only=validate_only, raise_errors=raise_errors),
                   what="incremental_alter_configs")

    # ------------------------------------------------------------------ SCRAM users and ACLs
    def alter_user_scram_credentials(self, upsertions: Sequence[tuple[str, str, str, int]] = (),
                                     deletions: Sequence[tuple[str, str]] = ()) -> dict[str, KafkaError | None]:
        return run(self._aio.alter_user_scram_credentials(upsertions, deletions),
                   what="alter_user_scram_credentials")

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None,
                                        ) -> dict[str, list[tuple[str, int]] | KafkaError]:
        return run(self._aio.describe_user_scram_credentials(None if users is None else list(users)),
                   what="describe_user_scram_credentials")

    def create_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        return run(self._aio.create_acls(acls), what="create_acls")

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        return run(self._aio.describe_acls(acl_filter), what="describe_acls")

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding] | KafkaError]:
        return run(self._aio.delete_acls(filters), what="delete_acls")

    # ------------------------------------------------------------------ client quotas
    def describe_client_quotas(self, components: Sequence[tuple[str, int, str | None]] = (), strict: bool = False,
                               broker_id: int | None = None) -> list[tuple[QuotaEntity, dict[str, float]]]:
        return run(self._aio.describe_client_quotas(components, strict, broker_id), what="describe_client_quotas")

    def alter_client_quotas(self, entries: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
                            validate_only: bool = False, raise_errors: bool = True) -> list[KafkaError | None]:
        return run(self._aio.alter_client_quotas(list(entries), validate_only, raise_errors),
                   what="alter_client_quotas")

    # ------------------------------------------------------------------ transactions
    def list_transactions(self, states: Iterable[str] | None = None, producer_ids: Iterable[int] | None = None,
                          duration_filter_ms: int = -1) -> list[TransactionListing]:
        return run(self._aio.list_transactions(None if states is None else list(states),
                                               None if producer_ids is None else list(producer_ids),
                                               duration_filter_ms), what="list_transactions")

    def describe_transactions(self, transactional_ids: Iterable[str], *, raise_errors: bool = True,
                              ) -> dict[str, TransactionDescription | KafkaError]:
        return run(self._aio.describe_transactions(list(transactional_ids), raise_errors=raise_errors),
                   what="describe_transactions")

    def describe_producers(self, partitions: Iterable[tuple[str, int]], *, broker_id: int | None = None,
                           raise_errors: bool = True) -> dict[ConsumerTopicPartition, list[ProducerState] | KafkaError]:
        return run(self._aio.describe_producers(list(partitions), broker_id=broker_id, raise_errors=raise_errors),
                   what="describe_producers")

    # ------------------------------------------------------------------ consumer groups
    def list_consumer_groups(self, states: Iterable[str] | None = None) -> list[ConsumerGroupListing]:
        return run(self._aio.list_consumer_groups(None if states is None else list(states)),
                   what="list_consumer_groups")

    def describe_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                                 ) -> dict[str, ConsumerGroupDescription | KafkaError]:
        return run(self._aio.describe_consumer_groups(list(group_ids), raise_errors=raise_errors),
                   what="describe_consumer_groups")

    def delete_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                               ) -> dict[str, KafkaError | None]:
        return run(self._aio.delete_consumer_groups(list(group_ids), raise_errors=raise_errors),
                   what="delete_consumer_groups")

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                                    ) -> dict[ConsumerTopicPartition, OffsetAndMetadata]:
        return run(self._aio.list_consumer_group_offsets(group_id, None if partitions is None else list(partitions)),
                   what="list_consumer_group_offsets")

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
                                     *, raise_errors: bool = True) -> dict[ConsumerTopicPartition, KafkaError | None]:
        return run(self._aio.alter_consumer_group_offsets(group_id, dict(offsets), raise_errors=raise_errors),
                   what="alter_consumer_group_offsets")

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]], *,
                                      raise_errors: bool = True) -> dict[ConsumerTopicPartition, KafkaError | None]:
        return run(self._aio.delete_consumer_group_offsets(group_id, list(partitions), raise_errors=raise_errors),
                   what="delete_consumer_group_offsets")
