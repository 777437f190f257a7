# Shared helpers for scripts/*: timing, apt installs, cargo environment.
# Sourced, not run.

RIG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RIG_CACHE=${RIG_CACHE:-/var/cache/rig}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# cpu_ms: sets RIG_CPU_MS to the user+sys CPU milliseconds of this shell's finished
# children so far (cutime and cstime of /proc/PID/stat: every process a step starts, and
# theirs, once waited for). Not in $(...): a subshell has children of its own.
cpu_ms() {
    local f
    read -r -a f < "/proc/$BASHPID/stat"
    # Fields 16 and 17 (1-based) with a comm that has no space ("bash").
    RIG_CPU_MS=$(((f[15] + f[16]) * 1000 / RIG_CLK_TCK))
}
RIG_CLK_TCK=$(getconf CLK_TCK)

# step NAME CMD...: runs CMD, prints its wall and CPU time, keeps a summary for the end.
# CPU is user+sys of everything the step ran: on a shared or loaded machine wall time
# swells with the load, CPU time much less, so the two together say what a step costs.
# CMD exiting with RIG_SKIPPED (77, automake's "skipped") is shown as skipped, not as
# passed, and does not fail the run.
RIG_SKIPPED=77
RIG_TIMES=()
step() {
    local name=$1 t0 c0 ms cpu rc
    shift
    printf '\n==> %s\n' "$name"
    t0=$(date +%s%N)
    cpu_ms
    c0=$RIG_CPU_MS
    "$@"; rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    cpu_ms
    cpu=$((RIG_CPU_MS - c0))
    local verdict="FAILED ($rc)"
    [ $rc = 0 ] && verdict=ok
    [ $rc = $RIG_SKIPPED ] && verdict=skipped rc=0
    RIG_TIMES+=("$(printf '%-40s %5d.%d s wall %6d.%d s cpu  %s' "$name" $((ms / 1000)) $((ms % 1000 / 100)) \
        $((cpu / 1000)) $((cpu % 1000 / 100)) "$verdict")")
    return $rc
}

# step_bg NAME CMD...: step NAME CMD in the background, its output in a log under
# $RIG_BG_DIR; step_wait NAME waits for it, prints its log, and adds its summary line
# (its own wall and CPU). For I/O-bound work (downloads, debootstrap) beside compiles,
# and one-core work (fuzzing) beside a one-core QEMU guest.
declare -A RIG_BG_PID=()
RIG_BG_DIR=
step_bg() {
    local name=$1
    shift
    [ -n "$RIG_BG_DIR" ] || RIG_BG_DIR=$(mktemp -d)
    local key=${name//[^A-Za-z0-9]/_}
    (
        RIG_TIMES=()
        step "$name" "$@" > "$RIG_BG_DIR/$key.log" 2>&1
        rc=$?
        printf '%s\n' "${RIG_TIMES[0]}" > "$RIG_BG_DIR/$key.time"
        exit $rc
    ) &
    RIG_BG_PID[$name]=$!
    printf '\n==> %s: started in the background\n' "$name"
}
step_wait() {
    local name=$1 key=${1//[^A-Za-z0-9]/_} rc
    [ -n "${RIG_BG_PID[$name]:-}" ] || return 0
    wait "${RIG_BG_PID[$name]}"
    rc=$?
    unset "RIG_BG_PID[$name]"
    cat "$RIG_BG_DIR/$key.log"
    RIG_TIMES+=("$(cat "$RIG_BG_DIR/$key.time" 2> /dev/null || echo "$name: no time")  (background)")
    return $rc
}

times_summary() {
    local ms=$(((${EPOCHREALTIME/./} - RIG_T0) / 1000)) cpu
    cpu_ms
    cpu=$RIG_CPU_MS
    printf '\n==> times\n'
    printf '  %s\n' "${RIG_TIMES[@]}"
    printf '  %-40s %5d.%d s wall %6d.%d s cpu\n' total $((ms / 1000)) $((ms % 1000 / 100)) $((cpu / 1000)) $((cpu % 1000 / 100))
}
RIG_T0=${EPOCHREALTIME/./}

# apt_install PKG...: installs what is missing, once per run.
apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    if [ -z "${RIG_APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
        RIG_APT_UPDATED=1
    fi
    # The lock timeout: the test command's background steps install at the same time.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${missing[@]}"
}

# pinned_venv NAME REQUIREMENTS IMPORTS: prints the path of a Python venv under the
# cache with REQUIREMENTS installed (every package pinned there, so --no-deps brings in
# nothing unpinned), made once per set of pins and checked by running IMPORTS. Output of
# the install goes to stderr. Each step returns on failure itself: callers run it in
# $(...), where set -e does not reach.
pinned_venv() {
    local name=$1 req=$2 imports=$3 venv
    venv=$RIG_CACHE/py/$name-$(sha256sum "$req" | cut -c1-12) || return 1
    if [ ! -f "$venv/.installed" ]; then
        rm -rf "$venv"
        mkdir -p "$RIG_CACHE/py" || return 1
        # Debian's python3 has no venv module without python3-venv.
        if ! python3 -m venv "$venv" 2>/dev/null; then
            rm -rf "$venv"
            apt_install python3-venv >&2 || return 1
            /usr/bin/python3 -m venv "$venv" >&2 || return 1
        fi
        "$venv/bin/pip" install --quiet --no-deps --require-virtualenv -r "$req" >&2 || return 1
        "$venv/bin/python" -c "$imports" >&2 || return 1
        touch "$venv/.installed" || return 1
    fi
    echo "$venv"
}
