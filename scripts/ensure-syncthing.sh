#!/bin/sh
# Installs Debian's syncthing for the small-files bench (bench/small-files.bench.ts), which
# times Syncthing's own scan of the folder Weft syncs. Needs root (CI runs as root).
# Does nothing when syncthing is already on the PATH.
set -eu
if command -v syncthing >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-syncthing: syncthing is missing and we are not root; install it with: apt-get install -y syncthing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends syncthing
