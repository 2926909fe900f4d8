#!/bin/sh
# Installs the system programs the streaming side needs (Debian/Ubuntu): icecast2, haproxy (in front of Icecast by
# default, ICECAST_PROXY), nginx (nginx-light: serves HLS segments) and ffmpeg (with ffprobe), and chromium for the
# listen page's browser test. Idempotent: does nothing when they are already there. Works as root, or through sudo
# otherwise.
set -eu

if command -v icecast2 >/dev/null 2>&1 && command -v haproxy >/dev/null 2>&1 && command -v nginx >/dev/null 2>&1 && command -v ffmpeg >/dev/null 2>&1 \
  && command -v ffprobe >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1; then
  echo "icecast2, haproxy, nginx, ffmpeg and chromium already installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1; then
  as_root="sudo"
else
  echo "install-system-deps: need root or sudo to install icecast2, haproxy, nginx, ffmpeg and chromium" >&2
  exit 1
fi

$as_root apt-get update
# The Debian packages ask no questions non-interactively. icecast2 starts no service; haproxy's own service (where
# systemd runs) has a config that listens nowhere: serve runs a haproxy of its own with the config it generates. serve
# runs its own nginx the same way (the package's service, where systemd starts it, is left alone on port 80).
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends icecast2 haproxy nginx-light \
  ffmpeg chromium
