#!/usr/bin/env bash
# The compose file's Kafka broker (the apache/kafka image runs this instead of its own start
# script), set up as scripts/infra/kafka.mjs sets up the local one: SASL/SCRAM-SHA-512 for
# clients, the StandardAuthorizer with nothing allowed unless an ACL says so, `admin` as the only
# super user besides the broker. Each user's password comes from a compose secret
# (/run/secrets/<user>-kafka; kafka-admin and kafka-broker for those two); SCRAM credentials are
# written when the storage is formatted, on the first start. The ACLs come from the kafka-setup
# service (npm run kafka:setup).
set -euo pipefail

KAFKA_HOME=${KAFKA_HOME:-/opt/kafka}
SECRETS_DIR=${SECRETS_DIR:-/run/secrets}
DATA_DIR=${KAFKA_DATA_DIR:-/var/lib/kafka/data}
CONFIG_DIR=${KAFKA_CONFIG_DIR:-/tmp/kafka-config}
PORT=${KAFKA_PORT:-9092}
CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
ADVERTISED=${KAFKA_ADVERTISED_LISTENERS:?set KAFKA_ADVERTISED_LISTENERS (SASL_PLAINTEXT://host:port)}
USERS=(admin gateway idp mission-service brain-service hit-service notification-service)

secret_file() {
  case "$1" in
    admin | broker) echo "$SECRETS_DIR/kafka-$1" ;;
    *) echo "$SECRETS_DIR/$1-kafka" ;;
  esac
}
password() {
  local file
  file=$(secret_file "$1")
  [ -s "$file" ] || { echo "compose-broker: no password for Kafka user $1 in $file" >&2; exit 1; }
  tr -d '\r\n' < "$file"
}
jaas() { echo "org.apache.kafka.common.security.$1 required $2;"; }

umask 077
mkdir -p "$CONFIG_DIR" "$DATA_DIR"
# Every secret up front: a missing one stops the start here, not later inside a heredoc.
for user in broker "${USERS[@]}"; do password "$user" > /dev/null; done
broker=$(password broker)
cat > "$CONFIG_DIR/server.properties" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:$CONTROLLER_PORT
listeners=SASL_PLAINTEXT://:$PORT,CONTROLLER://localhost:$CONTROLLER_PORT
advertised.listeners=$ADVERTISED
listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$(jaas scram.ScramLoginModule "username=\"broker\" password=\"$broker\"")
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$(jaas plain.PlainLoginModule "username=\"broker\" password=\"$broker\" user_broker=\"$broker\"")
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:broker;User:admin
log.dirs=$DATA_DIR
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
PROPERTIES
# What the healthcheck signs in with.
cat > "$CONFIG_DIR/admin.properties" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$(jaas scram.ScramLoginModule "username=\"admin\" password=\"$(password admin)\"")
PROPERTIES

if [ ! -f "$DATA_DIR/meta.properties" ]; then
  scram=()
  for user in broker "${USERS[@]}"; do scram+=(--add-scram "SCRAM-SHA-512=[name=$user,password=$(password "$user")]"); done
  "$KAFKA_HOME/bin/kafka-storage.sh" format -t "$("$KAFKA_HOME/bin/kafka-storage.sh" random-uuid)" -c "$CONFIG_DIR/server.properties" "${scram[@]}" > /dev/null
  echo "compose-broker: storage formatted with SCRAM users: broker ${USERS[*]}"
fi
exec "$KAFKA_HOME/bin/kafka-server-start.sh" "$CONFIG_DIR/server.properties"
