"""Listener security: TLS contexts and I/O, SASL authentication, SCRAM credentials (docs/security.md)."""
