#!/bin/sh
# Stage: apply. Always runs (idempotence disabled): kernel parameters do not
# survive a reboot, so every apply loads the drop-in again.
# Exit codes: 0 = loaded into the running kernel;
#             3 = files staged only, the values take effect at the next boot
#                 (the target is not the live root, or no root, sysctl or writable /proc/sys here).
# Both codes are accepted by the config (returncodes [0, 3]).
set -eu
. "$(dirname "$0")/common.sh"

[ -f "$SYSCTL_FILE" ] || die "$SYSCTL_FILE is missing: install_profile.sh must run first"

# A /proc/sys mounted read-only (a sandbox such as `agent try`) cannot take the values.
proc_sys_read_only() {
    awk '$2 == "/proc/sys" && $4 ~ /(^|,)ro(,|$)/ { ro = 1 } END { exit !ro }' /proc/self/mounts 2>/dev/null
}

if [ -z "$TARGET" ] && [ "$(id -u)" = 0 ] && command -v sysctl >/dev/null 2>&1 && ! proc_sys_read_only; then
    log "loading $SYSCTL_FILE into the running kernel"
    sysctl -e -p "$SYSCTL_FILE"
    state=live
    rc=0
else
    log "$GPU_TUNING_TARGET is not the live root of this host (or no root, sysctl or writable /proc/sys): not touching the running kernel"
    log "the values take effect at the next boot (exit code 3, accepted)"
    state=deferred
    rc=3
fi
printf 'state=%s\nsource=%s\nactivated_at=%s\n' "$state" "${SYSCTL_FILE#"$TARGET"}" "$(now)" |
    write_file "$ACTIVATION_FILE" 0644
exit "$rc"
