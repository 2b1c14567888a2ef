#!/usr/bin/env bash
# Installs the third-party systems under test that systems/*.toml describe
# with `program = { tool = …, version = …, install = … }`, each into its own
# folder of the tools dir ($EPOCHAL_TOOLS, else ~/.cache/epochal/tools):
# <tools>/<name>-<version>/bin/<name>. The tools dir is outside any checkout,
# so a build (tansu at opt-level 1: about 10 minutes on 2 cores beside the
# workspace's build; 14 at opt-level 3 alone) is made once per machine
# and reused by every clone and run. The install command is read from the
# system file, so the file and this script cannot disagree.
#
#   bash ci/tools.sh            # every system that names a tool
#   bash ci/tools.sh tansu      # one
set -euo pipefail
cd "$(dirname "$0")/.."
tools=${EPOCHAL_TOOLS:-$HOME/.cache/epochal/tools}
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for file in systems/*.toml; do names+=("$(basename "$file" .toml)"); done
fi
for name in "${names[@]}"; do
  file=systems/$name.toml
  if [[ ! -f $file ]]; then
    echo "tools: no system file $file" >&2
    exit 2
  fi
  # name, version and install command of the tool, if the system names one.
  spec=$(python3 - "$file" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    program = tomllib.load(f)["node"]["program"]
if "tool" in program:
    print(program["tool"], program["version"], program["install"], sep="\t")
PY
)
  [[ -n $spec ]] || continue
  IFS=$'\t' read -r tool version install <<<"$spec"
  root=$tools/$tool-$version
  if [[ -x $root/bin/$tool ]]; then
    echo "== $tool $version: installed ($root/bin/$tool)"
    continue
  fi
  echo "== installing $tool $version for systems/$name.toml: $install --root $root"
  # Built in a target dir of its own, removed after, so the workspace's
  # target/ never holds a third party's build.
  build=$(mktemp -d)
  # shellcheck disable=SC2086 # the install command is words by design
  started=$SECONDS
  CARGO_TARGET_DIR=$build $install --force --root "$root.partial"
  rm -rf "$build" "$root"
  mv "$root.partial" "$root"
  echo "== $tool $version installed in $((SECONDS - started)) s: $root/bin/$tool"
done
