#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft mode) on 127.0.0.1, for development and tests.
#   deploy/kafka/kafka.sh fetch|start|stop|status|reset|acl ARGS...
# fetch: Kafka's jars from Maven Central into .cache/kafka (once). start: format the storage if it is empty (the data
# of an earlier start is kept), start the broker, wait until it accepts connections. reset: stop, wipe the data. Env: KIBITZ_KAFKA_PORT (9092), KIBITZ_KAFKA_CONTROLLER_PORT (9093),
# KIBITZ_CACHE (.cache), KIBITZ_KAFKA_PARTITIONS (4), KIBITZ_KAFKA_SASL_USERS ("user:password ..."; clients then
# authenticate with SASL/PLAIN or SCRAM-SHA-512 on the port, and the broker's own traffic uses a plaintext listener on
# port + 2),
# KIBITZ_KAFKA_ACLS (with SASL users: 1 turns the authorizer on, the first user a super user, everyone else allowed only
# what an ACL grants; `kafka.sh acl --add ...` runs Kafka's kafka-acls tool against the broker as that first user),
# KIBITZ_KAFKA_TLS (1: the port speaks TLS, SSL or with SASL users SASL_SSL, with a self-signed certificate for
# 127.0.0.1 made at the first start: clients take $KIBITZ_CACHE/kafka/run-PORT/tls/ca.pem as their CA file).
# A cluster (as the fault tests start one, streamer/devkafka.py Cluster): one start per node, each with its own ports
# and KIBITZ_KAFKA_NODE_ID (1), the same KIBITZ_KAFKA_VOTERS ("1@127.0.0.1:9093,2@...") and KIBITZ_KAFKA_CLUSTER_ID
# (a base64 UUID; default a new one), and KIBITZ_KAFKA_REPLICATION (1): the replication factor of internal and new
# topics, with min.insync.replicas 2 when it is above 1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
cache="${KIBITZ_CACHE:-$root/.cache}/kafka"
libs="$cache/libs-$version"
port="${KIBITZ_KAFKA_PORT:-9092}"
cport="${KIBITZ_KAFKA_CONTROLLER_PORT:-9093}"
run="$cache/run-$port"
node="${KIBITZ_KAFKA_NODE_ID:-1}"
voters="${KIBITZ_KAFKA_VOTERS:-$node@127.0.0.1:$cport}"
replication="${KIBITZ_KAFKA_REPLICATION:-1}"
min_isr=$(( replication > 1 ? 2 : 1 ))

die() { echo "kafka.sh: $*" >&2; exit 1; }

fetch() {
  [ -f "$libs/.complete" ] && return 0
  # brokers started at once (a cluster's nodes, parallel test processes) fetch one at a time; the later ones find the
  # jars there (flock is util-linux's, on every Debian)
  exec 9>"$cache/.fetch.lock"
  flock 9
  [ -f "$libs/.complete" ] && { exec 9>&-; return 0; }
  command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch Kafka $version from Maven Central"
  command -v java >/dev/null || die "Java 17 is needed to run the broker"
  echo "fetching Apache Kafka $version from Maven Central into $libs" >&2
  rm -rf "$libs.tmp"
  if ! mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >"$cache.mvn.log" 2>&1; then
    cat "$cache.mvn.log" >&2; die "Maven could not fetch Kafka $version (log above)"
  fi
  touch "$libs.tmp/.complete"
  rm -rf "$libs"; mv "$libs.tmp" "$libs"
  exec 9>&-
}

accepting() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

tls_keys() {  # a self-signed certificate for 127.0.0.1, made once per broker: $run/tls/ca.pem is the clients' CA file
  [ -f "$run/tls/ca.pem" ] && return 0
  mkdir -p "$run/tls"
  keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 3650 -dname "CN=127.0.0.1" \
    -ext "SAN=IP:127.0.0.1,DNS:localhost" -keystore "$run/tls/broker.p12" -storetype PKCS12 \
    -storepass kibitz-dev -keypass kibitz-dev >/dev/null 2>&1 || die "keytool could not make the broker's certificate"
  keytool -exportcert -rfc -alias broker -keystore "$run/tls/broker.p12" -storepass kibitz-dev \
    -file "$run/tls/ca.pem" >/dev/null 2>&1 || die "keytool could not export the broker's certificate"
}

first_user() { local u="${KIBITZ_KAFKA_SASL_USERS%% *}"; echo "${u%%:*}"; }

acl() {  # Kafka's kafka-acls tool (kafka.admin.AclCommand) against this broker, as the first SASL user
  [ -n "${KIBITZ_KAFKA_SASL_USERS:-}" ] || die "acl needs KIBITZ_KAFKA_SASL_USERS (its first user administers the ACLs)"
  local u="${KIBITZ_KAFKA_SASL_USERS%% *}"
  mkdir -p "$run"
  cat >"$run/admin.properties" <<PROPS
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${u%%:*}" password="${u#*:}";
PROPS
  if [ "${KIBITZ_KAFKA_TLS:-0}" = 1 ]; then
    printf 'security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$run/tls/ca.pem" >>"$run/admin.properties"
  else
    echo "security.protocol=SASL_PLAINTEXT" >>"$run/admin.properties"
  fi
  java -Xmx256m -Dlog4j.configuration=file:/dev/null -cp "$libs/*" kafka.admin.AclCommand \
    --bootstrap-server "127.0.0.1:$port" --command-config "$run/admin.properties" "$@"
}

start() {
  mkdir -p "$cache"
  fetch
  if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then
    echo "broker already running on 127.0.0.1:$port (pid $(cat "$run/pid"))"; return 0
  fi
  accepting && die "something else already listens on 127.0.0.1:$port"
  mkdir -p "$run/data"
  local listeners proto
  proto="$( [ -n "${KIBITZ_KAFKA_SASL_USERS:-}" ] && echo SASL_ )$( [ "${KIBITZ_KAFKA_TLS:-0}" = 1 ] && echo SSL || echo PLAINTEXT )"
  if [ "$proto" != PLAINTEXT ]; then
    listeners="listeners=$proto://127.0.0.1:$port,INTERNAL://127.0.0.1:$((port + 2)),CONTROLLER://127.0.0.1:$cport
advertised.listeners=$proto://127.0.0.1:$port,INTERNAL://127.0.0.1:$((port + 2))
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=$proto:$proto,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
  fi
  if [ "${KIBITZ_KAFKA_TLS:-0}" = 1 ]; then
    tls_keys
    listeners="$listeners
ssl.keystore.type=PKCS12
ssl.keystore.location=$run/tls/broker.p12
ssl.keystore.password=kibitz-dev
ssl.key.password=kibitz-dev"
  fi
  if [ -n "${KIBITZ_KAFKA_SASL_USERS:-}" ]; then
    local users="" u lname
    lname="$(echo "$proto" | tr 'A-Z' 'a-z')"
    for u in $KIBITZ_KAFKA_SASL_USERS; do users="$users user_${u%%:*}=\"${u#*:}\""; done
    listeners="$listeners
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.$lname.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$users;
listener.name.$lname.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
    if [ "${KIBITZ_KAFKA_ACLS:-0}" = 1 ]; then  # ANONYMOUS: the broker's own plaintext listeners
      listeners="$listeners
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:$(first_user);User:ANONYMOUS
allow.everyone.if.no.acl.found=false"
    fi
  elif [ "$proto" = PLAINTEXT ]; then
    listeners="listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  fi
  cat >"$run/server.properties" <<PROPS
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
$listeners
log.dirs=$run/data
num.partitions=${KIBITZ_KAFKA_PARTITIONS:-4}
auto.create.topics.enable=true
default.replication.factor=$replication
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replication
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$replication
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
# a dead worker's open transaction is aborted within a second of its timeout (default 10 s), so the partitions it
# wrote are readable again soon after another worker takes over (tests kill workers)
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
log.flush.interval.messages=1000000
PROPS
  cat >"$run/log4j.properties" <<'PROPS'
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
PROPS
  local cp="$libs/*" jopts=(-Xms256m -Xmx768m -XX:+UseG1GC -Djava.awt.headless=true "-Dlog4j.configuration=file:$run/log4j.properties")
  if [ ! -f "$run/data/meta.properties" ]; then  # format only an empty directory: a restart keeps the topics
    local cluster="${KIBITZ_KAFKA_CLUSTER_ID:-}"
    [ -n "$cluster" ] || cluster="$(java "${jopts[@]}" -cp "$cp" kafka.tools.StorageTool random-uuid)"
    local scram=() u
    for u in ${KIBITZ_KAFKA_SASL_USERS:-}; do  # each SASL user may also sign in with SCRAM-SHA-512
      scram+=(--add-scram "SCRAM-SHA-512=[name=${u%%:*},password=${u#*:}]")
    done
    java "${jopts[@]}" -cp "$cp" kafka.tools.StorageTool format --cluster-id="$cluster" -c "$run/server.properties" \
      "${scram[@]}" >"$run/format.log" 2>&1 || { cat "$run/format.log" >&2; die "formatting KRaft storage failed"; }
  fi
  nohup java "${jopts[@]}" -cp "$cp" kafka.Kafka "$run/server.properties" >"$run/broker.log" 2>&1 &
  echo $! >"$run/pid"
  for _ in $(seq 1 120); do
    if accepting; then echo "Kafka $version (KRaft) ready on 127.0.0.1:$port (pid $(cat "$run/pid"), log $run/broker.log)"; return 0; fi
    kill -0 "$(cat "$run/pid")" 2>/dev/null || { tail -30 "$run/broker.log" >&2; die "broker exited during start"; }
    sleep 0.5
  done
  tail -30 "$run/broker.log" >&2; die "broker did not accept connections within 60 s"
}

stop() {
  [ -f "$run/pid" ] || { echo "no broker running on port $port"; return 0; }
  local pid; pid="$(cat "$run/pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$run/pid"; echo "broker on port $port stopped"
}

case "${1:-}" in
  fetch) mkdir -p "$cache"; fetch ;;
  start) start ;;
  stop) stop ;;
  reset) stop; rm -rf "$run"; echo "broker data on port $port wiped" ;;
  acl) shift; acl "$@" ;;
  status) if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then echo "running (pid $(cat "$run/pid"))"; else echo "stopped"; exit 1; fi ;;
  *) echo "usage: $0 fetch|start|stop|status|reset|acl ARGS..." >&2; exit 2 ;;
esac
