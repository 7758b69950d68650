#!/bin/sh
# Installs Debian's rclone for the 10,000-file bench (bench/small-files.bench.ts), which
# compares Weft's upload with `rclone copy` to s3proxy. Needs root (CI runs as root).
# Does nothing when rclone is already on the PATH.
set -eu
if command -v rclone >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-rclone: rclone is missing and we are not root; install it with: apt-get install -y rclone" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends rclone
