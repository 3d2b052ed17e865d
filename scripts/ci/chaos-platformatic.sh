#!/usr/bin/env bash
# The Kafka chaos stacks (CI profile) with their consumers on @platformatic/kafka, under Node 24
# from the npm registry's `node` package (installed into a temporary directory; the machine's
# node is not changed). Needs the services `npm run test:chaos` needs (Kafka on 9092, PostgreSQL,
# redis-server on PATH).
#
#   bash scripts/ci/chaos-platformatic.sh [run.ts options]    (default: --client platformatic --scenario full)
#   NODE_LTS_MAJOR overrides the Node major (default 24)
set -euo pipefail
cd "$(dirname "$0")/../.."

name=chaos-platformatic source scripts/ci/node-from-npm.sh

# By default only the `full` scenario of each Kafka stack: its faults include every fault of
# `strict`, whose stricter verdict (no duplicate at all) the kafkajs run of the CI profile checks.
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--client platformatic --scenario full)
# The worker processes are forked with the harness's node: Node 24 too.
PATH="$node_dir:$PATH" "$node_bin" node_modules/ts-node/dist/bin.js --transpile-only test/chaos/run.ts --profile ci --stack all "${args[@]}"
