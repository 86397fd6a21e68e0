#!/usr/bin/env bash
# The browser check needs Debian's chromium. Install it where it is missing and apt-get can be used;
# elsewhere say so, and the browser test skips with that message (it never skips when CI is set).
exec bash "$(dirname "${BASH_SOURCE[0]}")/ensure_debian_package.sh" chromium "the browser check" \
  "the browser test will be skipped" chromium chromium-browser
