# shellcheck shell=bash
# Shared steps for hardware_runners/<name>/setup.sh: probe, install kforge-bot, measure, and
# register a GitHub Actions self-hosted runner (single-use: just-in-time or ephemeral).
#
# A setup.sh sets RUNNER_NAME, RUNNER_LABELS, TARGET_KIND (and optionally TORCH_INDEX_URL), defines
# hw_check, hw_install_system and hw_torch_check, sources this file and calls kforge_main "$@"
# (the NVIDIA runners source nvidia.sh, which does all of that but the names and GPU facts).
# Nothing here runs unless asked: `setup.sh check` (the default) only reads.

set -euo pipefail

KFORGE_HOME="${KFORGE_HOME:-/opt/kforge-bot}"
KFORGE_VENV="${KFORGE_VENV:-$KFORGE_HOME/venv}"
KFORGE_BOT_SPEC="${KFORGE_BOT_SPEC:-kforge-bot}"   # a pip requirement: a name, a path or a VCS URL
RUNNER_DIR="${RUNNER_DIR:-$KFORGE_HOME/actions-runner}"
RUNNER_USER="${RUNNER_USER:-kforge-runner}"
RUNNER_GROUP_ID="${RUNNER_GROUP_ID:-1}"
GITHUB_API="${GITHUB_API:-https://api.github.com}"

log() { printf '[%s] %s\n' "$RUNNER_NAME" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$RUNNER_NAME" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$RUNNER_NAME" "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "'$1' changes the system: run it as root (sudo $0 $1)"; }

# The labels config.sh adds by itself; everything else is passed with --labels.
custom_labels() {
  local out="" label
  IFS=',' read -r -a _labels <<<"$RUNNER_LABELS"
  for label in "${_labels[@]}"; do
    case "$label" in self-hosted|linux|Linux|x64|X64|arm64|ARM64) ;; *) out="${out:+$out,}$label" ;; esac
  done
  printf '%s\n' "$out"
}

common_check() {
  local ok=0
  log "labels: $RUNNER_LABELS (target kind: $TARGET_KIND)"
  [ "$(uname -s)" = Linux ] || { warn "not Linux: these scripts are written for Linux runners"; ok=1; }
  if [ -r /etc/os-release ]; then
    # shellcheck disable=SC1091
    . /etc/os-release
    log "os: ${PRETTY_NAME:-unknown}"
  fi
  if have python3; then log "python3: $(python3 --version 2>&1)"; else warn "python3 missing"; ok=1; fi
  if have cc; then log "cc: $(cc --version | head -n1)"; else warn "no C compiler (torch cpp_extension kernels need one)"; ok=1; fi
  if [ -x "$KFORGE_VENV/bin/kforge-bot" ]; then
    log "kforge-bot: $("$KFORGE_VENV/bin/kforge-bot" --version)"
  else
    warn "kforge-bot not installed in $KFORGE_VENV (run: $0 install-python)"
    ok=1
  fi
  check_runner_user || ok=1
  check_sandbox || ok=1
  return "$ok"
}

# Untrusted code (pull-request kernels, generated candidates) runs inside bubblewrap; the gate and the PR bot
# refuse to run without it inside GitHub Actions (policy isolation: required).
check_sandbox() {
  if ! have bwrap; then
    warn "bubblewrap (bwrap) missing: untrusted kernels cannot be sandboxed (run: $0 install-system)"
    return 1
  fi
  local as=()
  [ "$(id -u)" -eq 0 ] && id "$RUNNER_USER" >/dev/null 2>&1 && as=(runuser -u "$RUNNER_USER" --)
  if "${as[@]}" bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true 2>/dev/null; then
    log "sandbox: $(bwrap --version) works${as:+ as $RUNNER_USER}"
    return 0
  fi
  warn "bwrap is installed but cannot create namespaces${as:+ as $RUNNER_USER}: unprivileged user namespaces are"
  warn "restricted (Ubuntu 23.10+: kernel.apparmor_restrict_unprivileged_userns=1; or a container's seccomp profile)"
  warn "(run: $0 install-system, which loads the bwrap-userns-restrict AppArmor profile or sets the sysctl)"
  return 1
}

install_sandbox() {
  if have apt-get; then apt-get install -y bubblewrap
  elif have dnf; then dnf install -y bubblewrap
  else die "install bubblewrap with this system's package manager"; fi
  local knob=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
  if [ -r "$knob" ] && [ "$(cat "$knob")" = 1 ]; then
    if [ -f /etc/apparmor.d/bwrap-userns-restrict ] && have apparmor_parser; then
      apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict
      log "loaded the bwrap-userns-restrict AppArmor profile: bwrap may create user namespaces"
    else
      # A dedicated runner: allow unprivileged user namespaces for everyone (what the profile allows for bwrap).
      printf 'kernel.apparmor_restrict_unprivileged_userns = 0\n' >/etc/sysctl.d/60-kforge-userns.conf
      sysctl -q -p /etc/sysctl.d/60-kforge-userns.conf
      warn "set kernel.apparmor_restrict_unprivileged_userns=0 (/etc/sysctl.d/60-kforge-userns.conf): no bwrap profile here"
    fi
  fi
  check_sandbox
}

# Jobs run as an unprivileged user that cannot become root and cannot reach the Docker daemon.
check_runner_user() {
  if ! id "$RUNNER_USER" >/dev/null 2>&1; then
    warn "runner user '$RUNNER_USER' does not exist (create it: useradd --create-home $RUNNER_USER)"
    return 1
  fi
  local groups
  groups=" $(id -nG "$RUNNER_USER") "
  if [ "$(id -u "$RUNNER_USER")" -eq 0 ]; then warn "runner user is root: never run jobs as root"; return 1; fi
  case "$groups" in *" docker "*|*" sudo "*|*" wheel "*|*" adm "*)
    warn "runner user '$RUNNER_USER' is in a privileged group ($groups): a job could become root"; return 1 ;;
  esac
  log "runner user: $RUNNER_USER (groups:$groups)"
}

install_python() {
  have python3 || die "python3 is missing"
  mkdir -p "$KFORGE_HOME"
  [ -x "$KFORGE_VENV/bin/python" ] || python3 -m venv "$KFORGE_VENV"
  "$KFORGE_VENV/bin/python" -m pip install --upgrade pip
  if [ -n "${TORCH_INDEX_URL:-}" ]; then
    log "installing torch from $TORCH_INDEX_URL"
    "$KFORGE_VENV/bin/python" -m pip install torch --index-url "$TORCH_INDEX_URL"
  else
    "$KFORGE_VENV/bin/python" -m pip install torch
  fi
  "$KFORGE_VENV/bin/python" -m pip install "$KFORGE_BOT_SPEC"
  hw_torch_check "$KFORGE_VENV/bin/python"
  log "installed: $("$KFORGE_VENV/bin/kforge-bot" --version)"
}

run_doctor() {
  [ -x "$KFORGE_VENV/bin/kforge-bot" ] || die "kforge-bot is not installed (run: $0 install-python)"
  mkdir -p "$KFORGE_HOME/state"
  # --save stores the measured ceilings in the cache of the user running this; run it as the
  # runner user so jobs find them ($KFORGE_CACHE_DIR, XDG_CACHE_HOME or ~/.cache/kforge-bot, then ceilings/),
  # signed with that user's key: a ceilings file this machine did not write is ignored.
  "$KFORGE_VENV/bin/kforge-bot" doctor --target "$TARGET_KIND" --save --json "$KFORGE_HOME/state/doctor.json" "$@"
}

runner_arch() {
  case "$(uname -m)" in x86_64) echo x64 ;; aarch64|arm64) echo arm64 ;; *) die "unsupported CPU architecture $(uname -m)" ;; esac
}

download_runner() {
  local version="${RUNNER_VERSION:-}" arch tarball url
  have curl || die "curl is missing"
  if [ -z "$version" ]; then
    version="$(curl -fsS "$GITHUB_API/repos/actions/runner/releases/latest" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["tag_name"].lstrip("v"))')" \
      || die "cannot find the latest runner release; set RUNNER_VERSION (e.g. 2.329.0)"
  fi
  arch="$(runner_arch)"
  tarball="actions-runner-linux-${arch}-${version}.tar.gz"
  url="https://github.com/actions/runner/releases/download/v${version}/${tarball}"
  mkdir -p "$RUNNER_DIR"
  log "downloading $url"
  curl -fsSL -o "$RUNNER_DIR/$tarball" "$url"
  if [ -n "${RUNNER_SHA256:-}" ]; then
    echo "${RUNNER_SHA256}  $RUNNER_DIR/$tarball" | sha256sum -c - || die "checksum mismatch for $tarball"
  else
    warn "RUNNER_SHA256 not set: the download is not verified (the release page lists the checksum)"
  fi
  tar -xzf "$RUNNER_DIR/$tarball" -C "$RUNNER_DIR"
  rm -f "$RUNNER_DIR/$tarball"
  chown -R "$RUNNER_USER" "$RUNNER_DIR"
}

# An ephemeral runner: takes exactly one job, then unregisters. RUNNER_URL is the repository or
# organization URL, RUNNER_TOKEN a registration token (repository Settings > Actions > Runners, or
# POST /repos/{owner}/{repo}/actions/runners/registration-token; valid for one hour).
register_ephemeral() {
  need_root register
  : "${RUNNER_URL:?set RUNNER_URL, e.g. https://github.com/OWNER/REPO}"
  : "${RUNNER_TOKEN:?set RUNNER_TOKEN to a registration token}"
  check_runner_user || die "fix the runner user first"
  [ -x "$RUNNER_DIR/config.sh" ] || download_runner
  local name runner_home
  name="${RUNNER_NAME}-$(hostname -s)-$(date +%s)"
  runner_home="$(getent passwd "$RUNNER_USER" | cut -d: -f6)"
  ( cd "$RUNNER_DIR" && as_runner_user "$runner_home" ./config.sh --unattended --ephemeral --disableupdate \
      --url "$RUNNER_URL" --token "$RUNNER_TOKEN" --name "$name" --labels "$(custom_labels)" --work _work )
  log "registered $name; start it with: sudo -u $RUNNER_USER $RUNNER_DIR/run.sh (it exits after one job)"
}

# Run a command as the runner user with a clean environment: nothing of the caller's (tokens
# included) reaches it.
as_runner_user() {
  local home="$1"
  shift
  env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    setpriv --reuid="$RUNNER_USER" --regid="$(id -g "$RUNNER_USER")" --init-groups "$@"
}

# Just-in-time runners: a supervisor (root) asks GitHub for a single-use runner configuration,
# runs one job as the unprivileged runner user with a clean environment, wipes the work folder and
# repeats. The admin token (fine-grained: "Administration: write" on the repository, or
# "Self-hosted runners: write" on the organization) stays in a root-only file the job cannot read.
# GITHUB_SCOPE: repos/OWNER/REPO or orgs/ORG.
jit_loop() {
  need_root jit
  : "${GITHUB_SCOPE:?set GITHUB_SCOPE to repos/OWNER/REPO or orgs/ORG}"
  local token_file="${KFORGE_RUNNER_TOKEN_FILE:-/etc/kforge-bot/runner-admin-token}"
  [ -r "$token_file" ] || die "token file $token_file is missing"
  [ "$(stat -c '%u %a' "$token_file")" = "0 600" ] || die "$token_file must be owned by root with mode 600"
  check_runner_user || die "fix the runner user first"
  [ -x "$RUNNER_DIR/run.sh" ] || download_runner
  local private headers body response config name runner_home
  private="$(mktemp -d)"
  chmod 700 "$private"
  headers="$private/headers"
  trap 'rm -rf "$private"' EXIT
  runner_home="$(getent passwd "$RUNNER_USER" | cut -d: -f6)"
  while true; do
    name="${RUNNER_NAME}-$(hostname -s)-$(date +%s)"
    # Headers from a file: the token never appears in a process's arguments.
    printf 'Authorization: Bearer %s\nAccept: application/vnd.github+json\nX-GitHub-Api-Version: 2022-11-28\n' \
      "$(cat "$token_file")" >"$headers"
    body="$(RUNNER_JIT_NAME="$name" python3 -c 'import json, os
print(json.dumps({"name": os.environ["RUNNER_JIT_NAME"], "runner_group_id": int(os.environ["RUNNER_GROUP_ID"]),
                  "labels": os.environ["RUNNER_LABELS"].split(","), "work_folder": "_work"}))')"
    if ! response="$(curl -fsS -X POST -H "@$headers" --data "$body" "$GITHUB_API/$GITHUB_SCOPE/actions/runners/generate-jitconfig")"; then
      rm -f "$headers"
      warn "generate-jitconfig failed; retrying in 60 s"
      sleep 60
      continue
    fi
    rm -f "$headers"
    config="$(printf '%s' "$response" | python3 -c 'import json,sys; print(json.load(sys.stdin)["encoded_jit_config"])')"
    rm -rf "${RUNNER_DIR:?}/_work"
    log "runner $name waiting for one job"
    ( cd "$RUNNER_DIR" && as_runner_user "$runner_home" ./run.sh --jitconfig "$config" ) \
      || warn "runner $name exited with status $?"
    sleep 2
  done
}

usage() {
  cat <<EOF
usage: $0 COMMAND

  check            probe this machine (default; changes nothing)
  install-system   install the drivers/tools this runner needs (root; see README.md)
  install-python   create $KFORGE_VENV with torch and kforge-bot
  doctor           run kforge-bot doctor --target $TARGET_KIND --save (as the runner user)
  register         register one ephemeral runner (root; RUNNER_URL, RUNNER_TOKEN)
  jit              supervise just-in-time runners, one job each (root; GITHUB_SCOPE, token file)
  labels           print this runner's labels

Environment: KFORGE_HOME KFORGE_VENV KFORGE_BOT_SPEC TORCH_INDEX_URL RUNNER_DIR RUNNER_USER
RUNNER_VERSION RUNNER_SHA256 RUNNER_GROUP_ID GITHUB_API GITHUB_SCOPE KFORGE_RUNNER_TOKEN_FILE
EOF
}

kforge_main() {
  export RUNNER_LABELS RUNNER_GROUP_ID
  local cmd="${1:-check}"
  [ "$#" -gt 0 ] && shift
  case "$cmd" in
    check) local rc=0; common_check || rc=1; hw_check || rc=1
           if [ "$rc" -eq 0 ]; then log "check passed"; else warn "check found problems (above)"; fi
           return "$rc" ;;
    install-system) need_root install-system; install_sandbox; hw_install_system "$@" ;;
    install-python) install_python ;;
    doctor) run_doctor "$@" ;;
    register) register_ephemeral ;;
    jit) jit_loop ;;
    labels) printf '%s\n' "$RUNNER_LABELS" ;;
    -h|--help|help) usage ;;
    *) usage; die "unknown command '$cmd'" ;;
  esac
}
