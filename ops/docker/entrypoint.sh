#!/bin/sh
# `moldau-server [server.properties] [--override k=v ...]` (the default command) runs the broker with the
# MOLDAU_<SETTING> environment variables applied (broker/env_config.py); any other command runs as given, so
# `docker-compose exec broker-1 moldau-consumer-groups ...` and `docker run moldau bash` work.
set -e
if [ "${1:-moldau-server}" = "moldau-server" ]; then
    [ "$#" -gt 0 ] && shift
    exec python -m moldau.broker.env_config "$@"
fi
exec "$@"
