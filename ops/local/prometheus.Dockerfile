# Prometheus from Debian's package on the local base, standing in for `prom/prometheus`.
ARG BASE_IMAGE=moldau-local-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
