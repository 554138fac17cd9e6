# Sourced by the device scripts: the device image has no bubblewrap and no apt, so carried .deb files (apt-get
# download bubblewrap libcap2 libselinux1 into .deb/) are unpacked beside it, and every worker there runs sandboxed
# as it would on a runner.
if ! command -v bwrap >/dev/null && [ -d .deb ]; then
  mkdir -p /tmp/bw && for f in .deb/*.deb; do dpkg -x "$f" /tmp/bw; done
  export KFORGE_BWRAP=/tmp/bw/usr/bin/bwrap
fi
