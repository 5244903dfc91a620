#!/usr/bin/env bash
# bench/thread-cpu.sh SECONDS PATTERN... — where the time goes: samples every thread of the processes whose
# command line matches a PATTERN (pgrep -f) once per second for SECONDS, then prints each thread that was busy,
# by name, with its share of one core over the whole window (100% = one core saturated: the bottleneck).
# Run it beside a benchmark, e.g. bench/thread-cpu.sh 20 'cuasyncd --listen' 'cuasyncd --worker' &
set -uo pipefail
secs=$1; shift
hz=$(getconf CLK_TCK)
declare -A first last name
sample() {
	local p t f ticks
	for pat in "$@"; do
		for p in $(pgrep -f -- "$pat"); do
			[ "$p" = "$$" ] && continue
			for t in /proc/"$p"/task/*; do
				f=$(cat "$t/stat" 2>/dev/null) || continue
				f=${f##*) }                  # the fields after "(comm) "
				read -r -a a <<<"$f"
				ticks=$((a[11] + a[12]))     # utime + stime
				key="$p/${t##*/}"
				[ -n "${first[$key]:-}" ] || first[$key]=$ticks
				last[$key]=$ticks
				name[$key]="$(cat "$t/comm" 2>/dev/null) ($pat)"
			done
		done
	done
}
for ((i = 0; i <= secs; i++)); do
	sample "$@"
	[ "$i" -lt "$secs" ] && sleep 1
done
for key in "${!last[@]}"; do
	pct=$(( (last[$key] - first[$key]) * 100 / (hz * secs) ))
	[ "$pct" -ge 5 ] && printf '%4d%%  %-16s %s\n' "$pct" "$key" "${name[$key]}"
done | sort -rn
