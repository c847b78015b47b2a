#!/usr/bin/env bash
# Installs this build into BUILD/install, then builds the dgram example
# method out of tree against it (examples/method), as a user would: the
# conformance kit then loads BUILD/example-method/libcartage-dgram-method.so
# through CARTAGE_METHOD_PATH.
# usage: example_method_build.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
cmake --install "${build}" --prefix "${build}/install" > "${build}/example-method-install.log"
cmake -S "${src}/examples/method" -B "${build}/example-method" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${build}/install"
cmake --build "${build}/example-method"
test -f "${build}/example-method/libcartage-dgram-method.so"
echo "built ${build}/example-method/libcartage-dgram-method.so"
