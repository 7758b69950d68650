#!/bin/sh
# Installs Debian's Chromium for the desktop UI e2e test (e2e/test/desktop-ui.test.ts)
# when it is missing. Needs root (CI runs as root). Does nothing when /usr/bin/chromium exists.
set -eu
CHROMIUM="${WEFT_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-chromium: $CHROMIUM is missing and we are not root; install it with: apt-get install -y chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium
