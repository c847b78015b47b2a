#!/usr/bin/env bash
# Installs this build into BUILD/install, then builds the dgram example
# method out of tree against it (examples/method), as a user would: the
# conformance kit then loads BUILD/example-method/libcartage-dgram-method.so
# by its path. pkg-config is pointed at nothing, so the build proves that a
# method needs no libfabric (only the ofi method does). A second build names
# the next rank as each datagram's sender (DGRAM_SOURCE_SHIFT=1), for the
# test that the kit says what is wrong.
# usage: example_method_build.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
cmake --install "${build}" --prefix "${build}/install" > "${build}/example-method-install.log"
empty=$(mktemp -d)
trap 'rmdir "${empty}"' EXIT
for variant in example-method example-method-wrong-rank; do
  flags=""
  [ "${variant}" = example-method-wrong-rank ] && flags="-DDGRAM_SOURCE_SHIFT=1"
  PKG_CONFIG_LIBDIR="${empty}" PKG_CONFIG_PATH="" cmake -S "${src}/examples/method" -B "${build}/${variant}" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${build}/install" -DCMAKE_CXX_FLAGS="${flags}"
  cmake --build "${build}/${variant}"
  test -f "${build}/${variant}/libcartage-dgram-method.so"
  echo "built ${build}/${variant}/libcartage-dgram-method.so"
done
