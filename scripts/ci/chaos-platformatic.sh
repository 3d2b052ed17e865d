#!/usr/bin/env bash
# The Kafka chaos stacks (CI profile) with their consumers on @platformatic/kafka, under Node 24
# from the npm registry's `node` package (installed into a temporary directory; the machine's
# node is not changed). Needs the services `npm run test:chaos` needs (Kafka on 9092, PostgreSQL,
# redis-server on PATH).
#
#   bash scripts/ci/chaos-platformatic.sh [run.ts options]    (default: --client platformatic)
#   NODE_LTS_MAJOR overrides the Node major (default 24)
set -euo pipefail
cd "$(dirname "$0")/../.."

major="${NODE_LTS_MAJOR:-24}"
[[ "$major" =~ ^[0-9]+$ ]] || { echo "chaos-platformatic: NODE_LTS_MAJOR must be a major version, got \"$major\"" >&2; exit 1; }

dir="$(mktemp -d "${TMPDIR:-/tmp}/twophase-node$major.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
echo "-- installing node@$major from the npm registry into $dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "node@$major" >/dev/null
node_bin="$dir/node_modules/.bin/node"
[ -x "$node_bin" ] || { echo "chaos-platformatic: $node_bin was not installed" >&2; exit 1; }
version="$("$node_bin" --version)"
[[ "$version" == "v$major."* ]] || { echo "chaos-platformatic: expected Node $major, got $version" >&2; exit 1; }
echo "-- $version (machine: $(node --version))"

args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--client platformatic)
# The worker processes are forked with the harness's node: Node 24 too.
PATH="$dir/node_modules/.bin:$PATH" "$node_bin" node_modules/ts-node/dist/bin.js --transpile-only test/chaos/run.ts --profile ci --stack all "${args[@]}"
