#!/usr/bin/env bash
# The grader runs every submission in a bubblewrap jail (mzlite/grading/sandbox.py). Install Debian's
# bubblewrap where it is missing and apt-get can be used; elsewhere say so: the grader then falls
# back to the audit hook alone (its reports say the marks are not protected), and the jail's tests
# skip with that message (they fail when CI is set).
set -uo pipefail
command -v bwrap >/dev/null && { echo "the grader's jail uses $(command -v bwrap)"; exit 0; }
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "installing Debian's bubblewrap for the grader's jail ..."
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null && { echo "bubblewrap installed"; exit 0; }
  echo "could not install bubblewrap with apt-get" >&2
else
  echo "bubblewrap is missing and cannot be installed here (needs root and apt-get): the grader will use the audit hook only" >&2
fi
exit 0
