#!/bin/sh
# README.md's complete setup, run end to end (issue 21): tools/setup-host.sh as root with throwaway users, group
# and directories, then the daemon started as its user from the configuration file the script wrote, one local
# client per user and a remote mutual-TLS client with a token. Checks every file's owner and mode against the
# table in README.md, that the daemon runs as its user, that each local user is served as its own tenant, that
# the remote client is served as its tenant and refused without its token, that a user outside the group cannot
# reach the socket, and that the daemon refuses to start on a key it cannot read (exit 2, the file named).
# SKIP (77) when not root. Leaves nothing behind: the users, the group and the directory go at exit.
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$srcdir/build}
set -eu
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: test_setup_host: needs root (it creates users and a group, and runs the daemon as one of them)"
	exit 77
fi
for tool in openssl setpriv runuser useradd timeout; do
	command -v $tool >/dev/null || {
		echo "FAIL: $tool is missing"
		exit 1
	}
done

tag=cuat$(openssl rand -hex 3) # throwaway names: cuatXXXXXX + one letter
duser=${tag}d group=${tag}g alice=${tag}a bob=${tag}b remote=${tag}r outsider=${tag}o
top=$(mktemp -d /tmp/cuasetup.XXXXXX)
chmod 0755 "$top"
conf=$top/etc run=$top/run log=$top/daemon.log pid=
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	for u in "$alice" "$bob" "$remote" "$outsider" "$duser"; do userdel "$u" 2>/dev/null || true; done
	groupdel "$group" 2>/dev/null || true
	rm -rf "$top"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
ok() { echo "ok: $*"; }
check() { # description, then a command that must succeed
	what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
bad() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# The client users exist already (the README's alice and bob); the remote one stands in for another machine.
for u in "$alice" "$bob" "$remote" "$outsider"; do useradd --no-create-home --home-dir /nonexistent "$u"; done

echo "== tools/setup-host.sh $alice $bob"
CUASYNCD_USER=$duser CUASYNC_GROUP=$group CUASYNCD_CONFDIR=$conf CUASYNCD_RUNDIR=$run CUASYNCD_PORT=$port \
	CUASYNCD_HOST=localhost CUASYNCD_REMOTE=$remote CUASYNCD_START=no \
	sh "$srcdir/tools/setup-host.sh" "$alice" "$bob"

echo "== owners and modes, as README.md's table lists them"
# rows: | `/etc/cuasyncd/FILE` | OWNER | MODE | ...  (ci is the remote client's name there)
# shellcheck disable=SC2016 # backquotes of markdown, not command substitution
rows=$(sed -n 's/^| `\/etc\/cuasyncd\/\([^`]*\)` | \([a-z]*\) | \(0[0-7]*\) |.*/\1 \2 \3/p' "$srcdir/README.md")
[ -n "$rows" ] || bad "README.md has no table of the files tools/setup-host.sh makes"
echo "$rows" | while read -r file owner mode; do
	f=$conf/$(echo "$file" | sed "s/^clients\/ci/clients\/$remote/")
	[ "$owner" != cuasyncd ] || owner=$duser
	got=$(stat -c '%U %a' "$f" 2>/dev/null || echo missing)
	want="$owner $(echo "$mode" | sed 's/^0//')"
	if [ "$got" = "$want" ]; then ok "$file: $got"; else
		echo "FAIL: $file: $got, README says $want"
		echo x >>"$top/table-fails"
	fi
done
[ ! -e "$top/table-fails" ] || fails=$((fails + $(wc -l <"$top/table-fails")))
# No private key or token anywhere is readable by group or others.
for f in "$conf/ca.key" "$conf/server.pem" "$conf/tokens" "$conf/clients/$remote/client.pem" \
	"$conf/clients/$remote/token"; do
	m=$(stat -c '%a' "$f")
	case $m in ?00) ok "$f is private ($m)" ;; *) bad "$f is $m: readable by others" ;; esac
done
runuser -u "$alice" -- cat "$conf/server.pem" >/dev/null 2>&1 && bad "client user $alice can read the server's key"

# The daemon and the client as `make install` would place them, where every user reaches them (the build tree
# may lie under a directory only root may enter, such as /root): the daemon links no library of the build tree
# and starts its workers from its own executable; the client takes libcuasync from lib/.
install -d -m 0755 "$top/bin" "$top/lib"
install -m 0755 "$builddir/daemon/cuasyncd" "$top/bin/cuasyncd"
if [ -x "$builddir/examples/.libs/vector_add" ]; then # libtool's uninstalled program: the real one
	install -m 0755 "$builddir/examples/.libs/vector_add" "$top/bin/vector_add"
	cp -L "$builddir/client/.libs/libcuasync.so.0" "$top/lib/"
	chmod 0644 "$top/lib/libcuasync.so.0"
else
	install -m 0755 "$builddir/examples/vector_add" "$top/bin/vector_add"
fi
daemon=$top/bin/cuasyncd client=$top/bin/vector_add libs=$top/lib

# A build configured without --sysconfdir reads the file where README.md, the unit and setup-host.sh put it.
# shellcheck disable=SC2016 # the Makefile's own text
if grep -qx 'sysconfdir = ${prefix}/etc' "$builddir/Makefile" 2>/dev/null; then
	if "$daemon" --help | grep -q -- '--config FILE .*(default: /etc/cuasyncd/cuasyncd.conf when it exists)'; then
		ok "without --config the daemon reads /etc/cuasyncd/cuasyncd.conf"
	else
		bad "without --config the daemon reads $("$daemon" --help | sed -n 's/.*--config FILE .*(default: \([^ ]*\).*/\1/p')"
	fi
fi

echo "== the daemon as its user, from the configuration file"
mkfifo "$top/ready"
setpriv --reuid="$duser" --regid="$group" --init-groups \
	"$daemon" --config "$conf/cuasyncd.conf" --backend emu --emu-mem 256M --staging 32M --ring 1M \
	--ready-fd 3 3>"$top/ready" 2>"$log" &
pid=$!
ready=$(timeout 120 cat "$top/ready" || true)
case $ready in
"ready "*) ok "daemon started: $ready" ;;
*)
	bad "daemon did not start ('$ready')"
	cat "$log"
	exit 1
	;;
esac
# setpriv execs the daemon: the pid is the daemon's
check "the daemon runs as $duser (it is $(stat -c %U "/proc/$pid"))" [ "$(stat -c %U "/proc/$pid")" = "$duser" ]
check "the log names the configuration file read" grep -q "configuration file $conf/cuasyncd.conf read" "$log"
check "socket $group 0660 (it is $(stat -c '%G %a' "$run/cuasyncd.sock"))" \
	[ "$(stat -c '%G %a' "$run/cuasyncd.sock")" = "$group 660" ]

run_client() { # user, then VAR=value... for the client
	u=$1
	shift
	runuser -u "$u" -- env LD_LIBRARY_PATH="$libs" CUASYNC_TIMEOUT_MS=20000 "$@" "$client" /nonexistent 4096
}
echo "== one local client per user, each served as its tenant"
for u in "$alice" "$bob"; do
	if run_client "$u" CUASYNC_URL="ipc://$run/cuasyncd.sock" >"$top/$u.out" 2>&1; then
		ok "$u served"
	else
		bad "$u not served: $(cat "$top/$u.out")"
	fi
	uid=$(id -u "$u")
	check "uid $uid is served as tenant $u" grep -q "over ipc uid $uid .*, tenant $u\$" "$log"
done
if run_client "$outsider" CUASYNC_URL="ipc://$run/cuasyncd.sock" >"$top/outsider.out" 2>&1; then
	bad "$outsider (not in $group) was served"
else
	ok "$outsider (not in $group) is not served: $(tail -n 1 "$top/outsider.out")"
fi

echo "== the remote client: mutual TLS and a token"
# its directory copied to the remote machine, owned there by the user who runs it (README)
cdir=$top/remote
cp -r "$conf/clients/$remote" "$cdir"
chown -R "$remote" "$cdir"
remote_env="CUASYNC_URL=tls+tcp://localhost:$port CUASYNC_TLS_CA=$cdir/server.crt CUASYNC_TLS_CERT=$cdir/client.pem"
# shellcheck disable=SC2086 # the words of remote_env are meant to split
if run_client "$remote" $remote_env CUASYNC_TOKEN_FILE="$cdir/token" >"$top/remote.out" 2>&1; then
	ok "$remote served over tls+tcp"
else
	bad "$remote not served: $(cat "$top/remote.out")"
fi
check "the tls+tcp session is tenant $remote" grep -q "over tls+tcp.*, tenant $remote\$" "$log"
# shellcheck disable=SC2086
if run_client "$remote" $remote_env >"$top/notoken.out" 2>&1; then
	bad "$remote was served without its token"
else
	check "without its token: UNAUTHENTICATED ($(tail -n 1 "$top/notoken.out"))" grep -q UNAUTHENTICATED "$top/notoken.out"
fi
# by address: the certificate names 127.0.0.1 too
if run_client "$remote" CUASYNC_URL="tls+tcp://127.0.0.1:$port" CUASYNC_TLS_CA="$cdir/server.crt" \
	CUASYNC_TLS_CERT="$cdir/client.pem" CUASYNC_TOKEN_FILE="$cdir/token" >"$top/byip.out" 2>&1; then
	ok "$remote served when dialling 127.0.0.1"
else
	bad "$remote not served by IP address: $(cat "$top/byip.out")"
fi

kill "$pid"
st=0
wait "$pid" || st=$?
check "the daemon stopped cleanly at SIGTERM (exit status $st)" [ "$st" = 0 ]
pid=

echo "== a key the daemon's user cannot read: exit 2, the file named"
chown root "$conf/server.pem"
st=0
setpriv --reuid="$duser" --regid="$group" --init-groups "$daemon" --config "$conf/cuasyncd.conf" --backend emu \
	2>"$top/unreadable.log" || st=$?
check "exit status 2, which the unit does not restart (it is $st)" [ "$st" = 2 ]
check "the error names the file and the user: $(grep -- --tls-cert "$top/unreadable.log" || cat "$top/unreadable.log")" \
	grep -q -- "--tls-cert $conf/server.pem: Permission denied, as user $duser" "$top/unreadable.log"

echo "== without --config and without the default file: a warning says so"
default=$("$daemon" --help | sed -n 's/.*--config FILE .*(default: \([^ ]*\) when it exists).*/\1/p')
if [ -n "$default" ] && [ ! -e "$default" ]; then
	# plain tcp:// stops the start right after the configuration is logged (exit 2): nothing is served
	st=0
	"$daemon" --listen "tcp://127.0.0.1:$port" --backend emu 2>"$top/noconf.log" || st=$?
	check "'no configuration file: $default does not exist' logged" \
		grep -q "warn: no configuration file: $default does not exist" "$top/noconf.log"
	check "plain tcp:// refused with exit status 2 (it is $st)" [ "$st" = 2 ]
else
	ok "skipped: $default exists on this host"
fi

if [ "$fails" != 0 ]; then
	echo "== daemon log"
	cat "$log"
	echo "$fails check(s) failed"
	exit 1
fi
echo "all checks passed"
