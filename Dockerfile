# Moldau broker image: `docker build -t moldau .` (docker-compose.yml builds it for its three brokers).
# Configuration: MOLDAU_<SETTING> environment variables (MOLDAU_BROKER_ID -> broker.id, see broker/env_config.py)
# over /etc/moldau/server.properties; data in the /var/lib/moldau/data volume; metrics on :9404/metrics.
# PYTHON_IMAGE is a build argument so that a machine without registry access can build on a local base.
ARG PYTHON_IMAGE=python:3.11.9-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN python3 -m venv /opt/moldau
# For builders whose containers cannot reach a package index (scripts/compose.sh without a registry): a
# wheelhouse/ folder in the build context, made on the host, holds the dependencies' wheels, setuptools and wheel,
# and requirements.txt (pyproject.toml's dependencies). They are installed offline, before Moldau's sources are
# copied, so that layer stays cached while only Moldau changes.
COPY README.md wheelhous[e] /wheels/
RUN if [ -f /wheels/requirements.txt ]; then \
        /opt/moldau/bin/pip install --no-cache-dir --no-input --no-index --find-links /wheels \
            -r /wheels/requirements.txt; \
    fi
COPY pyproject.toml README.md ./
COPY client client
COPY broker broker
COPY protocol protocol
COPY storage storage
COPY testing testing
COPY spark_plugin spark_plugin
# Every console tool, moldau-consumer-groups included, runs on Moldau's own client: no other Kafka client is
# installed.
RUN if [ -f /wheels/requirements.txt ]; then \
        /opt/moldau/bin/pip install --no-cache-dir --no-input --no-index --find-links /wheels .; \
    else \
        /opt/moldau/bin/pip install --no-cache-dir --no-input .; \
    fi

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/moldau --shell /usr/sbin/nologin moldau \
    && mkdir -p /var/lib/moldau/data /etc/moldau \
    && chown -R moldau:moldau /var/lib/moldau
COPY --from=build /opt/moldau /opt/moldau
COPY ops/docker/server.properties /etc/moldau/server.properties
COPY ops/docker/entrypoint.sh /usr/local/bin/moldau-entrypoint
COPY ops/docker/healthcheck.py /usr/local/bin/moldau-healthcheck
ENV PATH=/opt/moldau/bin:$PATH PYTHONUNBUFFERED=1 MOLDAU_CONFIG_FILE=/etc/moldau/server.properties
USER moldau
WORKDIR /var/lib/moldau
VOLUME ["/var/lib/moldau/data"]
EXPOSE 9092 9404
# Healthy = the first listener accepts connections and /metrics answers.
HEALTHCHECK --interval=5s --timeout=4s --start-period=20s --retries=6 CMD ["python", "/usr/local/bin/moldau-healthcheck"]
ENTRYPOINT ["/usr/local/bin/moldau-entrypoint"]
CMD ["moldau-server"]
