#!/usr/bin/env bash
# Builds the escrow program: clang-19 compiles the single translation unit src/main.c for BPF
# (sBPF version 0 needs -mcpu=v2), then the project's linker writes the program ELF.
# Usage: program/build.sh [output.so]  (default: program/escrow.so). Deterministic for one clang.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/escrow.so}"
CLANG="${CLANG:-clang-19}"
if ! command -v "$CLANG" >/dev/null; then
  echo "build:program needs $CLANG (Debian: apt-get install -y clang-19)" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$CLANG" -target bpfel -mcpu=v2 -O2 -fno-builtin -ffreestanding -fno-stack-protector \
  -mllvm -bpf-stack-size=4096 -Wall -Wextra -Werror -Wno-unused-function -std=c11 \
  -c "$here/src/main.c" -o "$work/escrow.o"
node --import tsx "$here/linker/main.ts" "$work/escrow.o" "$out"
