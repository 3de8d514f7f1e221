#!/usr/bin/env bash
# Installs the system packages Phosphor's build and tests need on a fresh Debian machine.
# Safe to run repeatedly: it installs only what is missing.
set -euo pipefail

need=()
command -v python3 >/dev/null || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v curl >/dev/null || need+=(curl ca-certificates)
# llama.cpp (the `llamacpp` engine) builds with CMake and a C++ compiler; its bindings come from bindgen (libclang).
cmake --version >/dev/null 2>&1 || need+=(cmake)
command -v c++ >/dev/null || need+=(g++)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
# llama.cpp's Vulkan backend (the `vulkan` feature, built in CI): headers, loader and the shader compiler.
dpkg -s libvulkan-dev >/dev/null 2>&1 || need+=(libvulkan-dev)
dpkg -s spirv-headers >/dev/null 2>&1 || need+=(spirv-headers)
command -v glslc >/dev/null || need+=(glslc)
# Node.js and npm run the real agent clients `phosphor serve` is tested with (Claude Code, Codex CLI).
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# A throwaway Postgres server for the store's conformance tests (scripts/test-postgres.sh starts it).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)

if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings, which llama.cpp's Vulkan backend uses.
# Newer headers (header-only, Debian 13's libvulkan-dev) go into a private prefix; `cargo xtask` points CMake at
# it with CMAKE_PREFIX_PATH. The loader library stays the system's.
vk_version="1.4.309.0-1"
vk_sha256="8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a"
vk_dir="${PHOSPHOR_CACHE_DIR:-$HOME/.cache/phosphor}/vulkan-headers-$vk_version"
if [ ! -f "$vk_dir/usr/include/vulkan/vulkan.hpp" ]; then
  tmp="$(mktemp -d)"
  curl -fsSL -o "$tmp/vk.deb" \
    "https://deb.debian.org/debian/pool/main/v/vulkan-loader/libvulkan-dev_${vk_version}_amd64.deb"
  echo "$vk_sha256  $tmp/vk.deb" | sha256sum -c --quiet
  dpkg -x "$tmp/vk.deb" "$tmp/root"
  mkdir -p "$vk_dir.partial/usr"
  cp -r "$tmp/root/usr/include" "$vk_dir.partial/usr/"
  rm -rf "$vk_dir" "$tmp"
  mv "$vk_dir.partial" "$vk_dir"
fi
