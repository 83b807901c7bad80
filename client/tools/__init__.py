"""Kafka's console tools over Moldau's own client (installed as ``moldau-...`` entry points)."""
