#!/usr/bin/env bash
# `make compat`: CPython's regression suite (Debian's
# libpython3.11-testsuite), one module at a time, natively and in a
# `qrun do` sandbox over the host's root, with a per-module timeout.
# Writes a table of pass/fail per side to docs/compat/cpython-DATE.md and
# keeps every log under the work directory it prints.
#
# usage: scripts/compat-cpython.sh [MODULE_LIST]
#   MODULE_LIST  modules one a line (default docs/compat/cpython-modules.txt)
# environment:
#   QRUN=path     the qrun binary (default target/release/qrun; copied first,
#                 so a rebuild during the run does not change it)
#   TIMEOUT=s     seconds per module and side (default 180)
#   MEMORY=size   guest memory (default 1G)
#   OUT=file      the table (default docs/compat/cpython-$(date +%F).md)
#   ONLY=native|sandbox  run one side only (the other column says "-")
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
list=${1:-$root/docs/compat/cpython-modules.txt}
timeout_s=${TIMEOUT:-180}
memory=${MEMORY:-1G}
out=${OUT:-$root/docs/compat/cpython-$(date +%F).md}
only=${ONLY:-}
python=/usr/bin/python3.11

if [ ! -f /usr/lib/python3.11/test/test_os.py ]; then
	echo "installing libpython3.11-testsuite" >&2
	if [ "$(id -u)" = 0 ]; then
		apt-get install -y --no-install-recommends libpython3.11-testsuite >&2
	else
		sudo apt-get install -y --no-install-recommends libpython3.11-testsuite >&2
	fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/qrun-compat-XXXXXX")
qrun_src=${QRUN:-$root/target/release/qrun}
[ -x "$qrun_src" ] || { echo "no qrun at $qrun_src: run make build" >&2; exit 1; }
cp "$qrun_src" "$work/qrun"
mkdir -p "$work/logs"
echo "compat: logs in $work/logs" >&2

# TMPDIR is each run's own directory: regrtest names its scratch directory
# after its pid, which is 1 in every sandbox.
env_vars=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin)

# Prints the verdict of one run from its status and log: pass, fail, skip,
# timeout, or "pass, exit N" when regrtest reported success but the
# interpreter then failed (in the sandbox: regrtest's exit watchdog is a
# thread, which the guest kernel cannot start yet).
verdict() {
	local rc=$1 log=$2
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo timeout
	elif grep -q "^Tests result: SUCCESS" "$log"; then
		if [ "$rc" = 0 ]; then echo pass; else echo "pass, exit $rc"; fi
	elif [ "$rc" = 0 ] && grep -qE "skipped|NO TESTS RAN" "$log"; then
		echo skip
	else
		echo fail
	fi
}

run_native() {
	local m=$1 dir="$work/native-$1"
	mkdir -p "$dir"
	(cd "$dir" && timeout -k 10 "$timeout_s" env -i "${env_vars[@]}" TMPDIR="$dir" \
		"$python" -m test -q "$m") >"$work/logs/$m.native.log" 2>&1 </dev/null && echo 0 || echo $?
}

run_sandbox() {
	local m=$1 dir="$work/sandbox-$1"
	local envs=()
	for e in "${env_vars[@]}" TMPDIR="$dir"; do envs+=(--env "$e"); done
	mkdir -p "$dir"
	(cd "$dir" && timeout -k 10 "$timeout_s" "$work/qrun" do --memory "$memory" \
		"${envs[@]}" -- "$python" -m test -q "$m") \
		>"$work/logs/$m.sandbox.log" 2>&1 </dev/null && echo 0 || echo $?
}

rows=()
n=0 native_pass=0 sandbox_pass=0 sandbox_clean=0 both=0 regressions=()
# The list is read on fd 3: the runs must not eat it from stdin.
while read -r m _ <&3; do
	case "$m" in '' | '#'*) continue ;; esac
	n=$((n + 1))
	nv=- sv=- nt=- st=-
	if [ "$only" != sandbox ]; then
		t0=$(date +%s)
		rc=$(run_native "$m")
		nt=$(($(date +%s) - t0))
		nv=$(verdict "$rc" "$work/logs/$m.native.log")
	fi
	if [ "$only" != native ]; then
		t0=$(date +%s)
		rc=$(run_sandbox "$m")
		st=$(($(date +%s) - t0))
		sv=$(verdict "$rc" "$work/logs/$m.sandbox.log")
	fi
	case "$nv" in pass*) np=1 ;; *) np=0 ;; esac
	case "$sv" in pass*) sp=1 ;; *) sp=0 ;; esac
	native_pass=$((native_pass + np))
	sandbox_pass=$((sandbox_pass + sp))
	[ "$sv" = pass ] && sandbox_clean=$((sandbox_clean + 1))
	both=$((both + np * sp))
	[ "$np" = 1 ] && [ "$sp" = 0 ] && [ "$sv" != - ] && regressions+=("$m")
	rows+=("| $m | $nv | $sv | $nt | $st |")
	echo "compat: $m native $nv (${nt}s) sandbox $sv (${st}s)" >&2
done 3<"$list"

mkdir -p "$(dirname "$out")"
{
	echo "# CPython regression suite: native vs qrun sandbox ($(date +%F))"
	echo
	echo "\`make compat\` (scripts/compat-cpython.sh): Debian's libpython3.11-testsuite,"
	echo "\`python3.11 -m test -q MODULE\` per module, natively and under"
	echo "\`qrun do --memory $memory\` with the host's root, ${timeout_s} s timeout per module"
	echo "and side. Modules: $(basename "$list")."
	echo
	echo "- modules: $n"
	echo "- pass natively: $native_pass"
	echo "- pass in the sandbox: $sandbox_pass (of which $sandbox_clean also exit 0; the others"
	echo "  passed every test but regrtest's exit watchdog thread could not start)"
	echo "- pass on both sides: $both"
	echo "- pass natively, not in the sandbox: ${#regressions[@]}${regressions:+ (${regressions[*]})}"
	echo
	echo "| module | native | sandbox | native s | sandbox s |"
	echo "|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} >"$out"
echo "compat: wrote $out" >&2
