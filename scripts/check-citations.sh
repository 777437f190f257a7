#!/usr/bin/env bash
# Fails when a comment or doc cites something a person who clones rig does not have: a
# file outside the repository (the notes folder beside it, its reference/ files, a notes
# file named without a path, a "file.md §N" section number), the private "seed" notes,
# one of rig's issue numbers, or a path of a developer's machine (a home or work folder,
# in text or in a binary fixture's bytes). Hardware facts are cited from docs/hardware/, runs
# from docs/h200.md, docs/BENCHMARKS.md and docs/RELIABILITY.md (CONTRIBUTING.md, "Where
# facts live"). An RNG seed ("seed: u64", "rig.seed=N", "the seed is printed") is not a
# citation and passes.
#
#   scripts/check-citations.sh            check every tracked text file
#
# Vendored crates under third_party/ are upstream's text; only their RIG-PATCH.md notes
# are checked. So are the RustSec advisories vendored under tests/audit/advisories/crates.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || {
    echo "check-citations: needs a git checkout (it reads the tracked files)" >&2
    exit 2
}

case ${1:-} in
    "") ;;
    *) echo "usage: scripts/check-citations.sh" >&2; exit 2 ;;
esac

# name|PCRE. Kept narrow so that ordinary words pass: "seed" alone, "issue #442" of
# another project, "docs/hardware/nvidia-rm.md".
RULES=(
    'outside file|\bshar[e]d/(reference|seeds|STYLE)|\.\./shar[e]d/'
    'outside file|\b(gpu-hardware-notes|gpu-load-path)\b'
    'outside file|\b(hopper-compute|style-anchors|anchors|crates|DEVELOPERS|STYLE)\.md\b'
    'outside file|\breference/[\w.-]+\.md'
    'outside file|(?<![\w/.-])h200\.md'
    'section of a notes file|\.md`?\s*§'
    'seed notes|(?i)\bseed notes?\b|\bseed'"'"'s\b|\(seed[:,](?!\s*(&|\[|[ui](8|16|32|64|128|size)\b|Option|Vec|Self\b))|(//[/!]?|#|\*)\s*seed[:,]\s|\bthe seed (measured|says|said|found|figures)\b|\bfrom the seed\b'
    'issue number|\b[Ii]ssues? [0-9]+'
    'developer path|(?<![\w.-])(/home/[a-z_][\w.-]*|/Users/[\w.-]+|/work/[\w.-]+)/'
)
# The same paths inside binary files (a cubin's line table keeps its build directory).
DEV_PATH_BYTES='(/home/[a-z_][\w.-]*|/Users/[\w.-]+|/work/[\w.-]+)/'
# Bare names of files that exist in docs/hardware/: outside it they must say where.
BARE_RULE='outside file|(?<![\w/.-])(nvidia-rm|qemu-tier)\.md'

base=(':(exclude)third_party' ':(exclude)tests/audit/advisories/crates'
    ':(exclude)scripts/check-citations.sh')

# grep_rule NAME PCRE PATHSPEC...: prints "path:line: [NAME] text" for each match.
grep_rule() {
    local name=$1 re=$2
    shift 2
    git grep -n -I -P -e "$re" -- "$@" 2>/dev/null | sed "s/^\([^:]*:[0-9]*\):/\1: [$name]/"
}

check() { # check PATHSPEC...: every rule over these paths
    local r
    for r in "${RULES[@]}"; do grep_rule "${r%%|*}" "${r#*|}" "$@"; done
    grep_rule "${BARE_RULE%%|*}" "${BARE_RULE#*|}" "$@" ':(exclude)docs/hardware'
}

found=$(
    check . "${base[@]}"
    grep_rule 'outside file' '\.\./shar[e]d/|\bshar[e]d/(reference|seeds)' 'third_party/*/RIG-PATCH.md'
    grep_rule 'issue number' '\b[Ii]ssues? [0-9]+' 'third_party/*/RIG-PATCH.md'
    comm -23 <(git grep -l -a -P -e "$DEV_PATH_BYTES" -- . "${base[@]}" 2>/dev/null) \
        <(git grep -l -I -P -e "$DEV_PATH_BYTES" -- . "${base[@]}" 2>/dev/null) |
        sed 's/$/:0: [developer path] (in the binary file'"'"'s bytes)/'
)
found=$(printf '%s\n' "$found" | sed '/^$/d' | sort -u)

if [ -n "$found" ]; then
    printf '%s\n' "$found"
    n=$(printf '%s\n' "$found" | cut -d: -f1,2 | sort -u | wc -l)
    echo "check-citations: $n line(s) cite what a clone of rig does not have; cite docs/hardware/," \
        "docs/h200.md, docs/BENCHMARKS.md or docs/RELIABILITY.md instead (CONTRIBUTING.md)" >&2
    exit 1
fi
echo "check-citations: clean"
