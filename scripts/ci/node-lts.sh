#!/usr/bin/env bash
# CI: the unit, conformance and in-process (memory adapter) suites under the current Node LTS,
# taken from the npm registry's `node` package and installed into a temporary directory. The
# machine's own node (the one every other CI step uses) is not changed.
#
#   bash scripts/ci/node-lts.sh            Node 24 (NODE_LTS_MAJOR overrides the major)
set -euo pipefail
cd "$(dirname "$0")/../.."

major="${NODE_LTS_MAJOR:-24}"
[[ "$major" =~ ^[0-9]+$ ]] || { echo "node-lts: NODE_LTS_MAJOR must be a major version, got \"$major\"" >&2; exit 1; }

SUITES=(
  test/unit
  test/conformance
  test/model/in-memory-claimer.model.test.ts
  test/model/pipeline.model.test.ts
  test/fuzz/memory-adapter.fuzz.test.ts
  test/fuzz/s18-memory-fake-timers.test.ts
)

dir="$(mktemp -d "${TMPDIR:-/tmp}/twophase-node$major.XXXXXX")"
trap 'rm -rf "$dir"' EXIT

echo "-- installing node@$major from the npm registry into $dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "node@$major" >/dev/null
node_bin="$dir/node_modules/.bin/node"
[ -x "$node_bin" ] || { echo "node-lts: $node_bin was not installed" >&2; exit 1; }
version="$("$node_bin" --version)"
[[ "$version" == "v$major."* ]] || { echo "node-lts: expected Node $major, got $version" >&2; exit 1; }
echo "-- $version (machine: $(node --version))"

# jest's workers and anything a suite spawns by name run on the same node: put it first on PATH.
PATH="$dir/node_modules/.bin:$PATH" "$node_bin" node_modules/jest/bin/jest.js "${SUITES[@]}"
