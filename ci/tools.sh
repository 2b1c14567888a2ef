#!/usr/bin/env bash
# Installs the third-party systems under test that systems/*.toml describe
# with `program = { tool = …, version = …, install = … }`, each into its own
# folder of the tools dir ($EPOCHAL_TOOLS, else ~/.cache/epochal/tools):
# <tools>/<name>-<version>/bin/<name>. By default the install command is
# cargo's, run with `--force --root <folder>` added. With `installer = "pip"`
# the folder is a venv and the command runs inside it (its pip first on
# PATH); `executable` names the program's file in the venv's site-packages,
# hard-linked as bin/<name> (a package's console script is a Python wrapper
# whose child is the program, so signals sent to it would miss the broker).
# The tools dir is outside any checkout, so a build (tansu at opt-level 1:
# about 10 minutes on 2 cores beside the workspace's build; 14 at opt-level 3
# alone) is made once per machine and reused by every clone and run. The
# install command is read from the system file, so the file and this script
# cannot disagree.
#
#   bash ci/tools.sh            # every system that names a tool
#   bash ci/tools.sh tansu      # one (the system file's name)
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
    print(program["tool"], program["version"], program["install"],
          program.get("installer", "cargo"), program.get("executable", "-"),
          sep="\t")
PY
)
  [[ -n $spec ]] || continue
  IFS=$'\t' read -r tool version install installer executable <<<"$spec"
  root=$tools/$tool-$version
  if [[ -x $root/bin/$tool ]]; then
    echo "== $tool $version: installed ($root/bin/$tool)"
    continue
  fi
  started=$SECONDS
  case $installer in
  cargo)
    echo "== installing $tool $version for systems/$name.toml: $install --root $root"
    # Built in a target dir of its own, removed after, so the workspace's
    # target/ never holds a third party's build.
    build=$(mktemp -d)
    # shellcheck disable=SC2086 # the install command is words by design
    CARGO_TARGET_DIR=$build $install --force --root "$root.partial"
    rm -rf "$build" "$root"
    ;;
  pip)
    echo "== installing $tool $version for systems/$name.toml: $install (venv $root)"
    rm -rf "$root.partial"
    python3 -m venv "$root.partial"
    # shellcheck disable=SC2086 # the install command is words by design
    PATH=$root.partial/bin:$PATH VIRTUAL_ENV=$root.partial PIP_DISABLE_PIP_VERSION_CHECK=1 \
      $install
    site=$("$root.partial/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
    chmod +x "$site/$executable"
    ln "$site/$executable" "$root.partial/bin/$tool"
    rm -rf "$root"
    ;;
  *)
    echo "tools: $file: unknown installer $installer (cargo or pip)" >&2
    exit 2
    ;;
  esac
  # Moved into place whole, so bin/<name> exists only once installed. (A
  # moved venv's scripts name the old path; its python and the program
  # itself do not.)
  mv "$root.partial" "$root"
  echo "== $tool $version installed in $((SECONDS - started)) s: $root/bin/$tool"
done
