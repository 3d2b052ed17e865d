# Sourced by the CI scripts that run a step on another Node major: installs the npm registry's
# `node@$major` package into a temporary directory (the machine's node is not changed), checks
# its version, and sets `node_bin` and `node_dir` (put "$node_dir" first on PATH so that anything
# spawned by name runs on it too). The directory is removed when the sourcing script exits.
#
#   name=node-lts source scripts/ci/node-from-npm.sh      (NODE_LTS_MAJOR overrides the major, default 24)

major="${NODE_LTS_MAJOR:-24}"
[[ "$major" =~ ^[0-9]+$ ]] || { echo "$name: NODE_LTS_MAJOR must be a major version, got \"$major\"" >&2; exit 1; }

node_tmp="$(mktemp -d "${TMPDIR:-/tmp}/twophase-node$major.XXXXXX")"
trap 'rm -rf "$node_tmp"' EXIT
echo "-- installing node@$major from the npm registry into $node_tmp"
npm install --prefix "$node_tmp" --no-save --no-audit --no-fund --no-package-lock "node@$major" >/dev/null
node_dir="$node_tmp/node_modules/.bin"
node_bin="$node_dir/node"
[ -x "$node_bin" ] || { echo "$name: $node_bin was not installed" >&2; exit 1; }
version="$("$node_bin" --version)"
[[ "$version" == "v$major."* ]] || { echo "$name: expected Node $major, got $version" >&2; exit 1; }
echo "-- $version (machine: $(node --version))"
