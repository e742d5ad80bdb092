#!/usr/bin/env bash
# Makes a small host root in DIR (new, or an empty directory): /bin with a shell
# and the utilities the example package's steps run, /etc (with a hostname),
# /tmp, /var/tmp, /dev and /sys mount points, and /proc holding only
# sys/kernel/random/boot_id (this machine's boot ID, where the agent reads it on
# a host). A root to run the agent against instead of this machine's own `/`
# (examples/demo.sh builds its sandbox's lower root with it; README.md's tour
# uses it as ROOT).
#
#   examples/make-root.sh [--tools auto|busybox|host-tools] DIR
#
# The tools come from this machine, whatever it has:
#   auto        (default) busybox if a static one is on PATH, else host-tools
#   busybox     a static busybox from PATH and a link per applet (stops if there
#               is none: apt-get install busybox-static)
#   host-tools  copies of this machine's sh and utilities, with the shared
#               libraries and the dynamic loader `ldd` names for them
# The commands that would act on a machine (reboot, halt, poweroff, shutdown,
# systemctl, service) are stand-ins in every case: each says what it was asked,
# appends it to DIR/var/log/stand-ins.log and exits 0, so an interrupt run
# against DIR as root reboots nothing and restarts nothing.
# Nothing is installed and nothing outside DIR is written; no root needed.
# On success it prints what /bin holds, in one line.
set -euo pipefail

usage() {
    # The comment block at the top of this file.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

die() {
    echo "make-root: $*" >&2
    exit 1
}

bad_usage() {
    echo "make-root: $*" >&2
    usage >&2
    exit 2
}

tools=auto
dir=
while (($# > 0)); do
    case $1 in
        --tools)
            (($# >= 2)) || bad_usage "--tools needs a value"
            tools=$2
            shift 2
            ;;
        --tools=*)
            tools=${1#--tools=}
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        -*) bad_usage "unknown option '$1'" ;;
        *)
            [[ -z $dir ]] || bad_usage "one DIR only, got '$dir' and '$1'"
            dir=$1
            shift
            ;;
    esac
done
case $tools in
    auto | busybox | host-tools) ;;
    *) bad_usage "--tools must be auto, busybox or host-tools, got '$tools'" ;;
esac
[[ -n $dir ]] || bad_usage "missing DIR"
if [[ -e $dir || -L $dir ]]; then
    [[ -d $dir && ! -L $dir ]] || die "$dir exists and is not a directory"
    [[ -z $(ls -A "$dir") ]] || die "$dir is not empty"
fi

# The static busybox on PATH, if there is one. (ldd exits 1 for a static binary:
# read its output, not its status.)
static_busybox() {
    local bb
    bb=$(type -P busybox) || return 1
    { LC_ALL=C ldd "$bb" 2>&1 || true; } | grep -qE 'not a dynamic executable|statically linked' ||
        return 1
    printf '%s\n' "$bb"
}

# The shell and the utilities the example package's steps run
# (examples/packages/gpu-node-tuning/skyhook_dir/*.sh), plus a few to look around with.
HOST_TOOLS=(sh awk basename cat chmod cmp cp date dirname env grep head id ln ls mkdir mv
    printf rm rmdir sed sleep sort tail touch tr uname wc)

# Each tool copied into /bin under its own name (following links, so a
# multi-call binary still sees its name as argv[0]), and every shared library and
# the dynamic loader `ldd` names for it, at the same path.
copy_host_tools() {
    local name src lib deps missing=() unresolved=()
    local -A libs=()
    command -v ldd >/dev/null || die "--tools host-tools needs ldd (glibc or musl)"
    for name in "${HOST_TOOLS[@]}"; do
        if ! src=$(type -P "$name"); then
            missing+=("$name")
            continue
        fi
        cp -L "$src" "$dir/bin/$name"
        chmod 0755 "$dir/bin/$name"
        deps=$(LC_ALL=C ldd "$src" 2>&1 || true)
        if grep -q 'not found' <<<"$deps"; then
            unresolved+=("$name")
            continue
        fi
        # "libc.so.6 => /lib/.../libc.so.6 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)".
        while read -r lib; do
            libs[$lib]=1
        done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3; next } $1 ~ /^\// { print $1 }' <<<"$deps")
    done
    ((${#missing[@]} == 0)) || die "--tools host-tools needs ${missing[*]} on PATH (none found)"
    ((${#unresolved[@]} == 0)) || die "ldd cannot resolve the shared libraries of ${unresolved[*]}"
    for lib in "${!libs[@]}"; do
        mkdir -p "$dir$(dirname "$lib")"
        cp -L "$lib" "$dir$lib"
    done
    summary="${#HOST_TOOLS[@]} host tools (sh, sed, awk, ...) and ${#libs[@]} shared libraries"
}

# From here on, a failure leaves DIR as it was found (absent, or empty).
[[ -e $dir ]] && made_dir=false || made_dir=true
undo() {
    local rc=$?
    ((rc == 0)) && return
    if $made_dir; then
        rm -rf -- "$dir"
    else
        find "$dir" -mindepth 1 -delete
    fi
}
trap undo EXIT

busybox=
if [[ $tools != host-tools ]]; then
    busybox=$(static_busybox) || busybox=
    [[ -n $busybox || $tools == auto ]] ||
        die "--tools busybox needs a static busybox on PATH (apt-get install busybox-static)," \
            "or use --tools host-tools"
fi

mkdir -p "$dir"/{bin,etc,tmp,var/tmp,proc,dev,sys}
chmod 1777 "$dir/tmp"
if [[ -n $busybox ]]; then
    cp "$busybox" "$dir/bin/busybox"
    chmod 0755 "$dir/bin/busybox"
    for applet in $("$busybox" --list); do
        [[ $applet == busybox ]] || ln -s busybox "$dir/bin/$applet"
    done
    summary=busybox
else
    copy_host_tools
fi
# Stand-ins for the commands that act on the machine (busybox's reboot would call
# reboot(2) on this machine when the agent runs it as root).
mkdir -p "$dir/var/log"
for name in reboot halt poweroff shutdown systemctl service; do
    rm -f "$dir/bin/$name"
    cat >"$dir/bin/$name" <<STANDIN
#!/bin/sh
# A stand-in (examples/make-root.sh): this root is not a machine.
call=$name
for arg in "\$@"; do call="\$call \$arg"; done
echo "\$call" >>/var/log/stand-ins.log
echo "$name: a stand-in on this scratch root, nothing done (\$call)" >&2
STANDIN
    chmod 0755 "$dir/bin/$name"
done
echo "node-1" >"$dir/etc/hostname"
mkdir -p "$dir/proc/sys/kernel/random"
cat /proc/sys/kernel/random/boot_id >"$dir/proc/sys/kernel/random/boot_id"
echo "$summary"
