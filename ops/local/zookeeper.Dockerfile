# ZooKeeper from Debian's package on the local base, standing in for the official `zookeeper` image.
ARG BASE_IMAGE=moldau-local-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        zookeeper default-jre-headless netcat-openbsd && rm -rf /var/lib/apt/lists/*
RUN mkdir -p /data /datalog && printf '%s\n' 'tickTime=2000' 'dataDir=/data' 'dataLogDir=/datalog' \
        'clientPort=2181' 'admin.enableServer=false' '4lw.commands.whitelist=ruok,srvr,stat' > /etc/zoo.cfg
EXPOSE 2181
# The server's own run-time jars (as broker/launcher.py's ZK_JARS), not all of /usr/share/java: two slf4j bindings
# on one class path stop it.
ENV ZK_CLASSPATH=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/netty-handler.jar:/usr/share/java/netty-common.jar:/usr/share/java/netty-buffer.jar:/usr/share/java/netty-transport.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-codec.jar:/usr/share/java/netty-transport-native-epoll.jar:/usr/share/java/netty-transport-native-unix-common.jar:/usr/share/java/commons-cli.jar:/usr/share/java/metrics-core.jar:/usr/share/java/snappy-java.jar
CMD ["sh", "-c", "exec java -Xmx256m -Dzookeeper.admin.enableServer=false -cp \"$ZK_CLASSPATH\" org.apache.zookeeper.server.ZooKeeperServerMain /etc/zoo.cfg"]
