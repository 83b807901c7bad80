"""``moldau-verify``: a verifiable producer, consumers, an optional fault schedule on a cluster the tool launched,
and a checker of the resulting history in the manner of Jepsen's Kafka analysis (see docs/reliability.md).

It lives under moldau.broker because launching a cluster (``--launch``) runs brokers; the workload itself only
uses the client library (moldau.aio), so it works against any Kafka-protocol cluster.
"""
