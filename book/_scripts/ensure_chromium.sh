#!/usr/bin/env bash
# The browser check needs Debian's chromium. Install it where it is missing and apt-get can be used;
# elsewhere say so, and the browser test skips with that message (it never skips when CI is set).
set -uo pipefail
for b in chromium chromium-browser; do command -v "$b" >/dev/null && { echo "browser check uses $(command -v $b)"; exit 0; }; done
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "installing Debian's chromium for the browser check ..."
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && { echo "chromium installed"; exit 0; }
  echo "could not install chromium with apt-get" >&2
else
  echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser test will be skipped" >&2
fi
exit 0
