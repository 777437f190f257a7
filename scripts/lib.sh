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
    RIG_TIMES+=("$(printf '%-34s %5d.%d s wall %6d.%d s cpu  %s' "$name" $((ms / 1000)) $((ms % 1000 / 100)) \
        $((cpu / 1000)) $((cpu % 1000 / 100)) "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
    return $rc
}

times_summary() {
    local ms=$(((${EPOCHREALTIME/./} - RIG_T0) / 1000)) cpu
    cpu_ms
    cpu=$RIG_CPU_MS
    printf '\n==> times\n'
    printf '  %s\n' "${RIG_TIMES[@]}"
    printf '  %-34s %5d.%d s wall %6d.%d s cpu\n' total $((ms / 1000)) $((ms % 1000 / 100)) $((cpu / 1000)) $((cpu % 1000 / 100))
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
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        RIG_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
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
