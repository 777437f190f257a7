#!/bin/sh
# Stages tinygrad for the H200 phase `tinygrad` of tests/h200/compute.sh: the pinned
# release's wheel (pure Python) and, under src/, its own tests from the same tag.
#
#     tests/h200/tinygrad/stage.sh TINYGRAD_GIT_DIR OUT_DIR   # OUT_DIR/tinygrad/...
set -eu
VERSION=0.13.0
git=$1
out=$2/tinygrad
rm -rf "$out"
mkdir -p "$out/src"
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$out" "tinygrad==$VERSION"
# The tests at the release's tag (and extra/models, which test_jit imports);
# pyproject.toml holds their pytest settings.
git --git-dir="$git" archive "v$VERSION" test extra/models pyproject.toml | tar -x -C "$out/src"
echo "tinygrad $VERSION: $(ls "$out"/*.whl), tests of tag v$VERSION ($(git --git-dir="$git" rev-parse "v$VERSION^{commit}"))"
