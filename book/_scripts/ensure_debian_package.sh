#!/usr/bin/env bash
# Install a Debian package that `make test` needs where its command is missing and apt-get can be
# used (root); elsewhere say what follows from its absence. Always exits 0: the caller's tests
# decide whether a missing tool skips or fails.
#   ensure_debian_package.sh PACKAGE PURPOSE WITHOUT COMMAND [COMMAND...]
# PURPOSE: what it is for ("the browser check"); WITHOUT: what happens without it.
set -uo pipefail
package=$1 purpose=$2 without=$3
shift 3
for cmd in "$@"; do
  command -v "$cmd" >/dev/null && { echo "$purpose uses $(command -v "$cmd")"; exit 0; }
done
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "installing Debian's $package for $purpose ..."
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null && { echo "$package installed"; exit 0; }
  echo "could not install $package with apt-get" >&2
else
  echo "$package is missing and cannot be installed here (needs root and apt-get): $without" >&2
fi
exit 0
