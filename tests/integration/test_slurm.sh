#!/bin/sh
# deploy/slurm end to end (issue 23): a one-node Slurm of Debian's slurm-wlm (slurmctld and slurmd in the
# foreground, their own munged, every file under a temporary directory) with deploy/slurm's prolog, epilog and
# TaskProlog and a cuasync GRES of 8 shares, beside this build's cuasyncd (emulated device of 64 MiB, an operator
# socket). Jobs of two throwaway users run tests/integration/slurm_job, a libcuasync client that reports on a FIFO
# and holds its memory until told to go. Checks that:
#   - each job's session is in its tenant slurm-job-ID, which `cuasyncctl tenant list` shows while it runs;
#   - the TaskProlog's CUASYNC_URL led the job to the daemon (the job sets no URL itself);
#   - a job of 4 shares gets 4/8 of the device and no more, and while it holds that, a job of 2 shares beside it
#     gets 2/8 and no more (its allocation past 2/8 is refused QUOTA although the device has room);
#   - a job's tenant is gone once it ended, and once it was cancelled (scancel);
#   - srun --gres=cuasync:1 is served the same way, and a job that asked for no shares gets no tenant.
# SKIP (77) when not root, when slurm-wlm or munge is missing, when this build's cuasyncctl has no `tenant`
# command yet, and in sanitizer builds (CI's plain build runs it). Leaves nothing behind: the daemons, users and the directory go at exit.
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$srcdir/build}
set -eu
skip() {
	echo "SKIP: test_slurm: $*"
	exit 77
}
case "${CUA_SAN_CFLAGS:-}" in
*sanitize=*) skip "sanitizer build: the plain build runs it (the daemon's code is the sanitizers' target, and other tests cover it; the jobs' client would run under slurmstepd as another user with LeakSanitizer)" ;;
esac
[ "$(id -u)" = 0 ] || skip "needs root (it runs slurmctld, slurmd and munged, and creates users)"
for tool in slurmctld slurmd sbatch srun scancel scontrol sinfo munged; do
	command -v $tool >/dev/null || skip "$tool is missing (apt-get install slurm-wlm munge)"
done
for tool in runuser useradd userdel timeout mkfifo hostname; do
	command -v $tool >/dev/null || {
		echo "FAIL: $tool is missing"
		exit 1
	}
done
ctl=$builddir/tools/cuasyncctl
for f in "$builddir/daemon/cuasyncd" "$ctl" "$builddir/tests/integration/slurm_job"; do
	[ -x "$f" ] || {
		echo "FAIL: $f is not built (make check builds it)"
		exit 1
	}
done
"$ctl" --help 2>&1 | grep -q 'tenant add' || skip "$ctl has no 'tenant add' yet (run-time tenants, issue 23)"

tag=cuas$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n') # throwaway names: cuasXXXXXX + one letter
ua=${tag}a ub=${tag}b
top=$(mktemp -d /tmp/cuaslurm.XXXXXX)
chmod 0755 "$top" # the jobs' users reach the client, the library, the socket and the FIFOs through it
node=$(hostname -s)
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
SLURM_CONF=$top/slurm.conf
export SLURM_CONF
dpid='' mpid='' cpid='' spid=''
stop() { # pid: TERM, then wait for it
	[ -z "$1" ] || kill "$1" 2>/dev/null || true
	[ -z "$1" ] || wait "$1" 2>/dev/null || true
}
cleanup() {
	if [ -n "$cpid" ]; then # the epilogs remove what is left, while the daemon still runs
		for u in "$ua" "$ub"; do timeout 30 scancel --user="$u" 2>/dev/null || true; done
	fi
	stop "$spid"
	stop "$cpid"
	stop "$dpid"
	stop "$mpid"
	for u in "$ua" "$ub"; do userdel "$u" 2>/dev/null || true; done
	rm -rf "$top"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
ok() { echo "ok: $*"; }
bad() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
logs() {
	for f in "$top"/log/*; do
		echo "---- $f"
		tail -n 40 "$f"
	done
}
die() {
	echo "FAIL: $*"
	logs
	exit 1
}
for u in "$ua" "$ub"; do useradd --no-create-home --home-dir /nonexistent "$u"; done
install -d -m 0755 "$top/bin" "$top/lib" "$top/log" "$top/state" "$top/spool" "$top/fifo"
install -d -m 1777 "$top/out"
# The jobs' users cannot be assumed to reach the build directory: the client and its library are copied.
if [ -x "$builddir/tests/integration/.libs/slurm_job" ]; then # libtool's uninstalled program: the real one
	install -m 0755 "$builddir/tests/integration/.libs/slurm_job" "$top/bin/slurm_job"
	cp -L "$builddir/client/.libs/libcuasync.so.0" "$top/lib/"
	chmod 0644 "$top/lib/libcuasync.so.0"
else
	install -m 0755 "$builddir/tests/integration/slurm_job" "$top/bin/slurm_job"
fi

echo "== munged, cuasyncd"
dd if=/dev/urandom of="$top/munge.key" bs=1024 count=1 2>/dev/null
chmod 0600 "$top/munge.key"
munged -F --force --socket="$top/munge.sock" --key-file="$top/munge.key" --log-file="$top/log/munged.log" \
	--pid-file="$top/munged.pid" --seed-file="$top/munged.seed" 2>>"$top/log/munged.log" &
mpid=$!
mkfifo "$top/ready"
# --session-mem 0: a session alone is not limited, so what limits a job is its tenant's share.
"$builddir/daemon/cuasyncd" --backend emu --emu-mem 64M --staging 1M --ring 1M --session-mem 0 \
	--listen "ipc://$top/cuasyncd.sock" --ipc-mode 0666 --operator-url "ipc://$top/operator.sock" \
	--ready-fd 3 3>"$top/ready" 2>"$top/log/cuasyncd.log" &
dpid=$!
ready=$(timeout 120 cat "$top/ready" || true)
case $ready in "ready "*) ok "cuasyncd: $ready" ;; *) die "cuasyncd did not start ('$ready')" ;; esac
CUASYNC_OPERATOR_URL=ipc://$top/operator.sock
export CUASYNC_OPERATOR_URL

echo "== slurmctld, slurmd"
cat >"$top/slurm.env" <<EOF
CUASYNC_SHARES=8
CUASYNC_OPERATOR_URL=$CUASYNC_OPERATOR_URL
CUASYNC_JOB_URL=ipc://$top/cuasyncd.sock
CUASYNCCTL=$ctl
CUASYNC_SESSIONS_PER_SHARE=2
EOF
# slurmd gives its scripts no environment of ours: a wrapper names the settings file (sites use the default,
# /etc/cuasyncd/slurm.env) and keeps what the scripts say. The scripts are copied: the TaskProlog runs as the
# job's user, who may not reach the source tree.
for s in prolog epilog taskprolog; do
	install -m 0755 "$srcdir/deploy/slurm/cuasync-$s" "$top/bin/cuasync-$s"
	printf '#!/bin/sh\nCUASYNC_SLURM_ENV=%s/slurm.env exec /bin/sh %s/bin/cuasync-%s 2>>%s/log/%s.log\n' \
		"$top" "$top" "$s" "$top" "$s" >"$top/$s"
	chmod 0755 "$top/$s"
	: >"$top/log/$s.log"
done
chmod 0666 "$top/log/taskprolog.log" # the TaskProlog runs as the job's user
hw=$(env -u SLURM_CONF slurmd -C 2>/dev/null | sed -n "s/^NodeName=[^ ]* \(.*CPUs=.*RealMemory=[0-9]*\).*/\1/p")
[ -n "$hw" ] || die "slurmd -C says no CPUs and RealMemory"
cat >"$SLURM_CONF" <<EOF
ClusterName=cuatest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$top/munge.sock
CredType=cred/munge
StateSaveLocation=$top/state
SlurmdSpoolDir=$top/spool
SlurmctldPidFile=$top/slurmctld.pid
SlurmdPidFile=$top/slurmd.pid
SlurmctldLogFile=$top/log/slurmctld.log
SlurmdLogFile=$top/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
GresTypes=cuasync
PrologFlags=Alloc
Prolog=$top/prolog
Epilog=$top/epilog
TaskProlog=$top/taskprolog
NodeName=$node NodeAddr=127.0.0.1 $hw Gres=cuasync:8 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
echo "Name=cuasync Count=8" >"$top/gres.conf"
slurmctld -D -i >"$top/log/slurmctld.out" 2>&1 &
cpid=$!
slurmd -D >"$top/log/slurmd.out" 2>&1 &
spid=$!
state=
for _ in $(seq 600); do # until the node is up (0.1 s apart, a minute at most)
	state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
	[ "$state" != idle ] || break
	kill -0 "$cpid" 2>/dev/null || die "slurmctld exited"
	kill -0 "$spid" 2>/dev/null || die "slurmd exited"
	sleep 0.1
done
[ "$state" = idle ] || die "node $node is '$state', not idle"
ok "node $node idle with $(scontrol show node "$node" | sed -n 's/.*\(Gres=[^ ]*\).*/\1/p')"

# tenant_listed NAME: whether `cuasyncctl --json tenant list` names it.
tenant_listed() {
	"$ctl" --json tenant list >"$top/tenants.json" 2>"$top/tenants.err" || {
		cat "$top/tenants.err"
		return 2
	}
	grep -q "\"$1\"" "$top/tenants.json"
}
# gone NAME: wait until the tenant is not listed (the epilog runs after the job ended; a minute at most).
gone() {
	for _ in $(seq 600); do
		grc=0
		tenant_listed "$1" || grc=$?
		[ "$grc" != 1 ] || return 0
		[ "$grc" = 0 ] || return 1 # cuasyncctl failed
		sleep 0.1
	done
	return 1
}
# submit USER NAME SHARES BYTES MORE: an sbatch job of USER running slurm_job with FIFOs fifo/ready.NAME and
# fifo/go.NAME; its job id on stdout.
submit() {
	mkfifo -m 0666 "$top/fifo/ready.$2" "$top/fifo/go.$2"
	runuser -u "$1" -- env -u CUASYNC_URL LD_LIBRARY_PATH="$top/lib" \
		sbatch --parsable --chdir=/ --gres="cuasync:$3" -o "$top/out/$2.out" -J "$2" \
		--wrap "exec $top/bin/slurm_job $top/fifo/ready.$2 $top/fifo/go.$2 $4 $5"
}
# report NAME: the line the job wrote on its FIFO (2 minutes at most).
report() {
	timeout 120 cat "$top/fifo/ready.$1" && return 0
	echo "FAIL: no report from job $1 in 2 minutes; it wrote:"
	cat "$top/out/$1.out" 2>/dev/null
	squeue -a 2>/dev/null
	return 1
}
# expect WHAT LINE PATTERN: LINE must match the case pattern.
expect() {
	# shellcheck disable=SC2254 # the pattern is meant
	case $2 in $3) ok "$1: $2" ;; *) bad "$1: '$2', not '$3'" ;; esac
}
M=1048576

echo "== job B (4 of 8 shares) alone, then job A (2 of 8) beside it"
jb=$(submit "$ub" B 4 $((31 * M)) $((2 * M))) || die "sbatch B failed"
rb=$(report B) || die "$rb"
expect "job B ($jb) holds 31 MiB of its 32, 2 more refused" "$rb" "tenant=slurm-job-$jb session=* alloc=OK more=QUOTA"
if tenant_listed "slurm-job-$jb"; then ok "tenant slurm-job-$jb listed"; else bad "tenant slurm-job-$jb not listed"; fi
ja=$(submit "$ua" A 2 $((15 * M)) $((2 * M))) || die "sbatch A failed"
ra=$(report A) || die "$ra"
# 46 MiB of 64 held: A's 2 more would fit the device, its share refuses them.
expect "job A ($ja) beside B holds 15 MiB of its 16, 2 more refused" "$ra" \
	"tenant=slurm-job-$ja session=* alloc=OK more=QUOTA"
if tenant_listed "slurm-job-$ja" && tenant_listed "slurm-job-$jb"; then
	ok "both tenants listed at once"
else
	bad "tenants slurm-job-$ja and slurm-job-$jb not both listed: $(cat "$top/tenants.json")"
fi
grep -q "\"$ua\"\\|$(id -u "$ua")" "$top/tenants.json" || bad "tenant list does not show job A's uid $(id -u "$ua")"

echo "== job A ends; job B is cancelled"
echo go >"$top/fifo/go.A"
if gone "slurm-job-$ja"; then ok "tenant slurm-job-$ja gone after the job ended"; else
	bad "tenant slurm-job-$ja still there after the job ended"
fi
tenant_listed "slurm-job-$jb" || bad "job B's tenant went with job A's"
scancel "$jb"
if gone "slurm-job-$jb"; then ok "tenant slurm-job-$jb gone after scancel"; else
	bad "tenant slurm-job-$jb still there after scancel"
fi

echo "== srun --gres=cuasync:1 (12% of the device)"
mkfifo -m 0666 "$top/fifo/ready.C" "$top/fifo/go.C"
runuser -u "$ua" -- env -u CUASYNC_URL LD_LIBRARY_PATH="$top/lib" \
	srun --chdir=/ --gres=cuasync:1 -J C "$top/bin/slurm_job" "$top/fifo/ready.C" "$top/fifo/go.C" $((6 * M)) \
	$((2 * M)) >"$top/out/C.out" 2>&1 &
srun_pid=$!
rcc=$(report C) || die "$rcc"
expect "srun job holds 6 MiB, 2 more refused (7.68 MiB is its share)" "$rcc" "tenant=slurm-job-* session=* alloc=OK more=QUOTA"
jc=$(echo "$rcc" | sed -n 's/^tenant=slurm-job-\([0-9]*\) .*/\1/p')
echo go >"$top/fifo/go.C"
wait "$srun_pid" || bad "srun exited $?: $(cat "$top/out/C.out")"
if [ -n "$jc" ] && gone "slurm-job-$jc"; then ok "tenant slurm-job-$jc gone after srun"; else
	bad "tenant of the srun job ('$jc') still there"
fi

echo "== a job that asked for no shares gets no tenant"
mkfifo -m 0666 "$top/fifo/ready.D" "$top/fifo/go.D"
jd=$(runuser -u "$ua" -- env -u CUASYNC_URL LD_LIBRARY_PATH="$top/lib" sbatch --parsable --chdir=/ \
	-o "$top/out/D.out" -J D --wrap "exec $top/bin/slurm_job $top/fifo/ready.D $top/fifo/go.D $M $M") ||
	die "sbatch D failed"
rd=$(report D) || die "$rd"
expect "job D ($jd) without --gres is in the daemon's default tenant" "$rd" "tenant=default session=* alloc=OK more=OK"
if tenant_listed "slurm-job-$jd"; then bad "job D got tenant slurm-job-$jd"; else ok "no tenant slurm-job-$jd"; fi
echo go >"$top/fifo/go.D"
# Its epilog finds no tenant to remove (NOT_FOUND), which is no failure: the node does not drain. The job is
# COMPLETING until its epilog ended.
js=
for _ in $(seq 600); do
	js=$(scontrol show job "$jd" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case $js in COMPLETING | RUNNING | PENDING | CONFIGURING) sleep 0.1 ;; *) break ;; esac
done
expect "job D's state once its epilog ran" "$js" COMPLETED
ns=$(scontrol show node "$node" | sed -n 's/.*State=\([^ ]*\).*/\1/p')
expect "node $node after job D's epilog (not drained)" "$ns" IDLE

echo "== the scripts said"
for s in prolog epilog taskprolog; do sed "s/^/$s: /" "$top/log/$s.log"; done
[ "$fails" = 0 ] || logs
echo "$fails failure(s)"
[ "$fails" = 0 ]
