#!/bin/sh
# tools/setup-host.sh — the complete multi-user setup of README.md ("A complete setup"), as root, after
# `make install`: the daemon's user and group, the client users admitted to the socket, a CA for remote clients,
# the daemon's certificate (with the host's names and addresses), one remote client's certificate and token,
# the configuration file, and the daemon started as its user. tests/integration/test_setup_host.sh runs it end
# to end, so what README.md shows is what works.
#
#   tools/setup-host.sh [LOCAL_USER...]        e.g. tools/setup-host.sh alice bob
#
# Each LOCAL_USER (an existing account) joins the socket's group and gets a tenant of its own name. It creates
# only what is missing: an existing key, certificate, token or configuration file is kept (delete one to make
# it anew). Settings, from the environment (the defaults are what the unit and the manuals use):
#   CUASYNCD_USER=cuasyncd  CUASYNC_GROUP=cuasync      the daemon's user; the group that may use the socket
#   CUASYNCD_CONFDIR=/etc/cuasyncd                     where the files go (the daemon's default --config dir)
#   CUASYNCD_RUNDIR=/run/cuasyncd                      the socket's directory
#   CUASYNCD_PORT=7744  CUASYNCD_HOST=$(hostname -f)    the TLS listener; the name remote clients dial
#   CUASYNCD_REMOTE=ci  CUASYNCD_REMOTE_OWNER=root     the remote client's name (tenant, certificate, token) and
#                                                      the local owner of its files until they are copied away
#   CUASYNCD_START=auto                                auto: `systemctl enable --now cuasyncd` when systemd
#                                                      runs, else print how to start it by hand; no: neither
set -eu

duser=${CUASYNCD_USER:-cuasyncd}
group=${CUASYNC_GROUP:-cuasync}
conf=${CUASYNCD_CONFDIR:-/etc/cuasyncd}
run=${CUASYNCD_RUNDIR:-/run/cuasyncd}
port=${CUASYNCD_PORT:-7744}
host=${CUASYNCD_HOST:-$(hostname -f 2>/dev/null || hostname)}
remote=${CUASYNCD_REMOTE:-ci}
remote_owner=${CUASYNCD_REMOTE_OWNER:-root}
start=${CUASYNCD_START:-auto}

say() { printf 'setup-host: %s\n' "$*"; }
die() {
	printf 'setup-host: %s\n' "$*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || die "run me as root (I create users and write $conf)"
command -v openssl >/dev/null || die "openssl is missing (apt-get install openssl)"
for u in "$@"; do
	id "$u" >/dev/null 2>&1 || die "no user '$u': create the account first (adduser $u)"
done

# 1. The daemon's user and group (what systemd/cuasyncd.sysusers declares; systemd-sysusers does the same).
getent group "$group" >/dev/null || groupadd --system "$group"
id "$duser" >/dev/null 2>&1 ||
	useradd --system --gid "$group" --home-dir /nonexistent --shell /usr/sbin/nologin "$duser"
# Local users: members of the group may connect to the socket (0660); each is a tenant of its own below.
for u in "$@"; do usermod -aG "$group" "$u"; done

# 2. The files, each with the narrowest owner and mode that works. Nothing is readable by anyone else while
# it is written (umask 077); public certificates are made 0644 afterwards.
umask 077
install -d -o root -g root -m 0755 "$conf"
cd "$conf"

# A CA that signs the remote clients' certificates (the daemon's --tls-ca). Its key signs clients: root only
# (better still, kept on another machine).
if [ ! -e clients-ca.pem ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out clients-ca.pem -subj /CN=cuasync-clients-ca \
		-days 3650 2>/dev/null
	say "made the clients' CA $conf/clients-ca.pem (its key $conf/ca.key: root only)"
fi
chmod 0600 ca.key
chmod 0644 clients-ca.pem

# The daemon's certificate and key. The key is the daemon user's alone (the group cuasync holds every client
# user, so a group-readable key would be every client's). The certificate names the host, localhost and every
# address of the host, as DNS names too: mbedTLS 2.28 (Debian 12), which libcuasync verifies with, matches a
# dialled IP address only against DNS entries, other TLS clients against IP entries.
if [ ! -e server.pem ]; then
	san="DNS:$host"
	[ "$host" = localhost ] || san="$san,DNS:localhost"
	for a in 127.0.0.1 ::1 $(hostname -I 2>/dev/null || true); do san="$san,DNS:$a,IP:$a"; done
	openssl req -x509 -newkey rsa:2048 -nodes -keyout server.key -out server.crt -subj "/CN=$host" -days 825 \
		-addext "subjectAltName=$san" 2>/dev/null
	cat server.crt server.key >server.pem # certificate and key in one file (--tls-cert)
	rm -f server.key
	say "made the daemon's certificate $conf/server.crt for $san"
fi
chown "$duser":root server.pem
chmod 0600 server.pem
chmod 0644 server.crt

# The tokens remote sessions present in HELLO (--token-file): the daemon user's alone (it refuses a file every
# user may read). One line name:token per remote client.
touch tokens
chown "$duser":root tokens
chmod 0600 tokens

# 3. The remote client: a certificate signed by the CA, a token, and the server's certificate to verify the
# daemon with, in one directory to copy to the remote machine (scp -r). Its key and token are private:
# 0600, owned by the one user who runs the client.
cdir=$conf/clients/$remote
install -d -o root -g root -m 0755 "$conf/clients"
install -d -o "$remote_owner" -m 0700 "$cdir"
if [ ! -e "$cdir/client.pem" ]; then
	openssl req -newkey rsa:2048 -nodes -keyout "$cdir/client.key" -out "$cdir/client.csr" -subj "/CN=$remote" \
		2>/dev/null
	openssl x509 -req -in "$cdir/client.csr" -CA clients-ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
		-out "$cdir/client.crt" -days 825 2>/dev/null
	cat "$cdir/client.crt" "$cdir/client.key" >"$cdir/client.pem" # $CUASYNC_TLS_CERT: certificate and key
	rm -f "$cdir/client.key" "$cdir/client.csr" "$cdir/client.crt"
	say "made $remote's certificate $cdir/client.pem"
fi
if ! grep -q "^$remote:" tokens || [ ! -e "$cdir/token" ]; then
	sed -i "/^$remote:/d" tokens
	token=$(openssl rand -hex 32)
	printf '%s:%s\n' "$remote" "$token" >>tokens
	printf '%s\n' "$token" >"$cdir/token" # $CUASYNC_TOKEN_FILE
	say "made $remote's token ($cdir/token)"
fi
cp server.crt "$cdir/server.crt" # $CUASYNC_TLS_CA: the daemon's certificate is its own CA
chown "$remote_owner" "$cdir/client.pem" "$cdir/token" "$cdir/server.crt"
chmod 0600 "$cdir/client.pem" "$cdir/token"
chmod 0644 "$cdir/server.crt"

# 4. The configuration file: no secrets, 0644. The daemon reads /etc/cuasyncd/cuasyncd.conf without --config
# (and logs "configuration file ... read"); `systemctl reload cuasyncd` re-reads it.
if [ ! -e cuasyncd.conf ]; then
	{
		cat <<EOF
# cuasyncd.conf(5), written by tools/setup-host.sh
[daemon]
listen = ipc://$run/cuasyncd.sock
ipc-mode = 0660
socket-group = $group
listen = tls+tcp://0.0.0.0:$port
tls-cert = $conf/server.pem
tls-ca = $conf/clients-ca.pem
token-file = $conf/tokens
EOF
		for u in "$@"; do
			printf '\n[tenant %s]\nuser = %s\nmem = 25%%\nsessions = 8\n' "$u" "$u"
		done
		printf '\n[tenant %s]\ntoken = %s\nmem = 25%%\nisolation = session\n' "$remote" "$remote"
		printf '\n# everyone else is turned away (PERMISSION_DENIED)\n[tenant default]\nrefuse = yes\n'
	} >cuasyncd.conf
	say "wrote $conf/cuasyncd.conf"
else
	say "kept the existing $conf/cuasyncd.conf (add tenants for $* there by hand)"
fi
chmod 0644 cuasyncd.conf

# The socket's directory (the unit's RuntimeDirectory= and systemd/cuasyncd.tmpfiles make it too).
[ -d "$run" ] || install -d -o "$duser" -g "$group" -m 0755 "$run"

# 5. The daemon, as its user.
if [ "$start" = auto ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable cuasyncd
	systemctl restart cuasyncd # a running daemon takes new listeners only at a start
	[ "$conf" = /etc/cuasyncd ] || say "the unit reads /etc/cuasyncd/cuasyncd.conf: give it --config $conf/cuasyncd.conf (systemctl edit cuasyncd)"
	say "cuasyncd runs: journalctl -u cuasyncd"
elif [ "$start" = auto ]; then
	say "no systemd running: start the daemon as its user with"
	say "  setpriv --reuid=$duser --regid=$group --init-groups cuasyncd --config $conf/cuasyncd.conf"
fi
say "remote client $remote: copy $cdir to it, then there:"
say "  CUASYNC_URL=tls+tcp://$host:$port CUASYNC_TLS_CA=server.crt CUASYNC_TLS_CERT=client.pem CUASYNC_TOKEN_FILE=token PROGRAM"
