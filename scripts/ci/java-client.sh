#!/usr/bin/env bash
# The official RabbitMQ Java client for the header-fidelity suite
# (test/integration/rabbitmq/rabbitmq-java-headers.test.ts): a JDK (17+) and Maven must be there
# (installed from Debian's packages when missing), and com.rabbitmq:amqp-client is resolved from
# Maven Central into ~/.m2 now, so the suite finds it. Anything missing fails CI, never skips.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v javac >/dev/null || ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  echo "JDK or Maven missing: installing openjdk-17-jdk-headless and maven"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven
fi
for tool in java javac mvn; do
  command -v "$tool" >/dev/null || { echo "$tool not found: the Java client suite cannot run" >&2; exit 1; }
done
mkdir -p .tmp/java-probe
mvn -q -B -f test/integration/rabbitmq/java/pom.xml dependency:build-classpath -Dmdep.outputFile="$PWD/.tmp/java-probe/classpath.txt"
echo "Java client: $(tr ':' '\n' < .tmp/java-probe/classpath.txt | grep -o 'amqp-client-[0-9.]*\.jar')"
