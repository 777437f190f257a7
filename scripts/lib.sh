# Shared helpers for scripts/*: timing, apt installs, cargo environment.
# Sourced, not run.

RIG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RIG_CACHE=${RIG_CACHE:-/var/cache/rig}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# step NAME CMD...: runs CMD, prints its wall time, keeps a summary for the end.
RIG_TIMES=()
step() {
    local name=$1 t0 ms rc
    shift
    printf '\n==> %s\n' "$name"
    t0=$(date +%s%N)
    "$@"; rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    RIG_TIMES+=("$(printf '%-34s %5d.%d s  %s' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
    return $rc
}

times_summary() {
    printf '\n==> times\n'
    printf '  %s\n' "${RIG_TIMES[@]}"
}

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
