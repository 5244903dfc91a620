#!/bin/sh
# The Kubernetes sidecar (tools/k8s-sidecar, issue 23) against a fake API server (tests/integration/k8s_fake.py,
# HTTPS with a throwaway CA) and a fake cuasyncctl that records its argv, so it does not need the daemon's
# tenant ops. Checks: the node status patch carries the shares (the documented JSON-patch path) and the token;
# the pod list is asked for this node only; a pod with shares gets `tenant add namespace/pod` with its uid and
# the limits of its annotations (or of its shares), a pod without shares or finished gets nothing, an over-long
# name is shortened with a hash, a hostile annotation value is refused and logged; a tenant registered before
# the start whose pod is gone is removed; a pod that goes gets `tenant remove`, a pod re-created under its name
# gets remove then add; bad JSON, a huge body (with and without a length), a depth bomb and items of the wrong
# types are logged, remove nothing and do not stop it; SIGTERM ends it with 0 and leaves the tenants; a server
# certificate another CA signed is refused.
# Then the manifests in deploy/kubernetes: tests/integration/check_k8s_manifests.py (python3-yaml) and yamllint
# when installed. SKIP (77) without python3 or openssl.
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$(pwd)}
set -eu
sidecar=$builddir/tools/cuasync-k8s-sidecar
for tool in python3 openssl; do
	command -v $tool >/dev/null || {
		echo "SKIP: test_k8s_sidecar: $tool is missing"
		exit 77
	}
done
[ -x "$sidecar" ] || {
	echo "FAIL: $sidecar is not built"
	exit 1
}
fake=$srcdir/tests/integration/k8s_fake.py
d=$(mktemp -d /tmp/cuak8s.XXXXXX)
srv= side=
cleanup() {
	[ -z "$side" ] || kill "$side" 2>/dev/null || true
	[ -z "$srv" ] || kill "$srv" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$d"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
ok() { echo "ok: $*"; }
bad() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# A CA and a server certificate for "localhost" (the name the sidecar checks).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fake-k8s-ca -keyout "$d/ca.key" -out "$d/ca.crt" \
	2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$d/srv.key" -out "$d/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' >"$d/ext"
openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 -extfile "$d/ext" \
	-out "$d/srv.crt" 2>/dev/null
printf 'test-token-123\n' >"$d/token"

# The fake cuasyncctl: records its argv in $d/ctl.log.
cat >"$d/cuasyncctl" <<EOF
#!/bin/sh
exec python3 "$fake" ctl "$d" "\$@"
EOF
chmod +x "$d/cuasyncctl"
# Before the start: one tenant of a pod that went while the sidecar was down, one of the configuration file.
echo '[{"name":"old/gone-pod"},{"name":"research"}]' >"$d/tenants.json"

# pods.json: $1 is the list's items (JSON). Written whole, then renamed: the server never reads half a file.
pods() {
	mark=$(wc -l <"$d/sidecar.log" 2>/dev/null || echo 0)
	printf '{"kind":"PodList","apiVersion":"v1","items":[%s]}\n' "$1" >"$d/pods.tmp"
	mv "$d/pods.tmp" "$d/pods.json"
}
raw() {
	mark=$(wc -l <"$d/sidecar.log")
	printf '%s' "$1" >"$d/pods.tmp"
	mv "$d/pods.tmp" "$d/pods.json"
}
# pod NS NAME UID PHASE SHARES ANNOTATIONS RUNASUSER -> one item (SHARES "" = no resource)
pod() {
	res='{}'
	[ -z "$5" ] || res="{\"limits\":{\"cuasync.io/shares\":\"$5\",\"cpu\":\"1\"}}"
	sc='{}'
	[ -z "$7" ] || sc="{\"runAsUser\":$7}"
	printf '{"metadata":{"namespace":"%s","name":"%s","uid":"%s","annotations":{%s}},' "$1" "$2" "$3" "$6"
	printf '"spec":{"nodeName":"node-1","securityContext":%s,"containers":[{"name":"c","resources":%s},' "$sc" "$res"
	printf '{"name":"side","resources":{}}]},"status":{"phase":"%s"}}' "$4"
}
longns=very-long-namespace-name-for-the-hash-case
longpod=a-pod-name-that-is-long-enough-to-pass-the-limit
A=$(pod team-a trainer uid-a Running 2 '"cuasync.io/streams":"4","cuasync.io/sessions":"3"' 1001)
B=$(pod team-b web uid-b Running "" '' 1002)
C=$(pod team-c infer uid-c Pending 1 '"cuasync.io/mem":"1G","cuasync.io/weight":"5","cuasync.io/uid":"2002"' "")
D=$(pod team-d done uid-d Succeeded 4 '' 1004)
E=$(pod $longns $longpod uid-e Running 8 '' 1005)
F=$(pod team-f evil uid-f Running 1 '"cuasync.io/weight":"--uid=0"' 1006)
pods "$A,$B,$C,$D,$E,$F"

python3 "$fake" server "$d" "$d/srv.crt" "$d/srv.key" &
srv=$!
i=0
while [ ! -s "$d/port" ]; do
	i=$((i + 1))
	[ $i -le 400 ] || {
		echo "FAIL: the fake API server did not start"
		exit 1
	}
	kill -0 $srv || exit 1
	sleep 0.05
done
port=$(cat "$d/port")

"$sidecar" --node node-1 --shares 8 --api-server "https://localhost:$port" --ca-file "$d/ca.crt" \
	--token-file "$d/token" --cuasyncctl "$d/cuasyncctl" --operator-url ipc:///run/cuasyncd/operator.sock \
	--interval-ms 50 --max-body 1048576 >"$d/sidecar.log" 2>&1 &
side=$!

# Waits until $2 (a python3 expression over `lines`, the JSON lines of $d/$1) holds; bounded.
wait_for() {
	i=0
	until python3 - "$d/$1" "$2" <<'EOF'; do
import json, os, sys
p = sys.argv[1]
lines = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
		i=$((i + 1))
		if [ $i -gt 400 ] || ! kill -0 $side 2>/dev/null; then
			bad "waited in vain for $1: $2"
			return 1
		fi
		sleep 0.05
	done
}
# Waits until the sidecar has asked for the pod list $1 more times: the rounds before the last have ended.
gets() { grep -c '"GET"' "$d/requests.log" 2>/dev/null || true; }
rounds() {
	n=$(($(gets) + $1))
	wait_for requests.log "sum(l['method'] == 'GET' for l in lines) >= $n"
}
has() { python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1]) in [json.loads(l) for l in open(sys.argv[2])] else 1)' "$1" "$d/ctl.log"; }
mentions() { grep -q -- "$1" "$d/ctl.log"; }
url='"--url","ipc:///run/cuasyncd/operator.sock"'

wait_for ctl.log "[$url,'tenant','add','team-a/trainer','--uid','1001','--streams','4','--sessions','3','--mem','25%','--weight','2'] in lines" &&
	ok "pod with 2 of 8 shares: tenant add team-a/trainer --uid 1001, its annotations, --mem 25% --weight 2"
rounds 3
if has "[$url,\"tenant\",\"add\",\"team-c/infer\",\"--uid\",\"2002\",\"--mem\",\"1G\",\"--weight\",\"5\"]"; then
	ok "a Pending pod: its tenant with the annotations' uid, mem and weight"
else bad "team-c/infer: $(cat "$d/ctl.log")"; fi
mentions team-b && bad "a pod without shares got a tenant" || ok "a pod without shares: nothing"
mentions team-d && bad "a Succeeded pod got a tenant" || ok "a finished pod: nothing"
if python3 - "$d/ctl.log" "$longns/$longpod" <<'EOF'; then
import json, sys
adds = [l[4] for l in map(json.loads, open(sys.argv[1])) if l[2:4] == ["tenant", "add"]]
long = [n for n in adds if n.startswith(sys.argv[2][:55])]
sys.exit(0 if len(long) == 1 and len(long[0]) == 64 and long[0][55] == "~" else 1)
EOF
	ok "an over-long namespace/pod: 64 bytes, 55 of them and ~hash"
else bad "long name: $(cat "$d/ctl.log")"; fi
mentions team-f && bad "a hostile annotation reached cuasyncctl" || ok "a hostile annotation: no tenant"
grep -q 'team-f/evil.*annotation cuasync.io/weight' "$d/sidecar.log" && ok "... and logged" ||
	bad "the hostile annotation was not logged: $(cat "$d/sidecar.log")"
has "[$url,\"--json\",\"tenant\",\"list\"]" && has "[$url,\"tenant\",\"remove\",\"old/gone-pod\"]" &&
	ok "a tenant of a pod gone before the start: removed" || bad "old/gone-pod not removed"
mentions '"research"' && bad "a configuration file's tenant was touched" || ok "a file's tenant: untouched"

# The node status patch and the requests' shape.
if python3 - "$d/requests.log" <<'EOF'; then
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
p = [x for x in r if x["method"] == "PATCH"]
assert p and p[0]["path"] == "/api/v1/nodes/node-1/status", p
assert p[0]["content_type"] == "application/json-patch+json", p
assert json.loads(p[0]["body"]) == [{"op": "add", "path": "/status/capacity/cuasync.io~1shares", "value": "8"}], p
g = [x for x in r if x["method"] == "GET"]
assert g and all(x["path"] == "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1" for x in g), g[:2]
assert all(x["authorization"] == "Bearer test-token-123" for x in r), r[:2]
EOF
	ok "PATCH /api/v1/nodes/node-1/status: capacity cuasync.io/shares = 8 (JSON patch), token sent, pods of node-1"
else bad "requests: $(head -c 2000 "$d/requests.log")"; fi

# Hostile answers: each is logged, removes nothing, and the sidecar goes on.
n0=$(wc -l <"$d/ctl.log")
hostile() { # description, log pattern
	rounds 2 || return 0
	kill -0 $side 2>/dev/null && tail -n +$((mark + 1)) "$d/sidecar.log" | grep -q -- "$2" && ok "$1: logged, still running" ||
		bad "$1: $(tail -3 "$d/sidecar.log")"
}
raw '{"items": [ {"metadata": '
hostile "bad JSON" "not JSON"
raw '#HUGE-LEN'
hostile "a 4 MiB body with its length" "over the limit of 1048576"
raw '#HUGE-STREAM'
hostile "a 4 MiB body without a length" "body over the limit"
raw "$(python3 -c 'import sys; sys.stdout.write("[" * 100000 + "]" * 100000)')"
hostile "100000 nested arrays" "not JSON"
raw '{"items": "not a list"}'
hostile "items of the wrong type" "not a pod list"
pods '{"metadata":5},{"metadata":{"namespace":["x"],"name":7,"uid":{}}},'"$(pod team-a trainer uid-a Running '' '' 1)"',7,null'
# (team-a/trainer with a shares value of the wrong type below: counted malformed, its tenant kept)
hostile "items of the wrong types" "item(s) of the list malformed"
pods "$(printf '%s' "$A" | sed 's/"cuasync.io\/shares":"2"/"cuasync.io\/shares":2/')"
hostile "shares of the wrong type" "item(s) of the list malformed"
[ "$(wc -l <"$d/ctl.log")" = "$n0" ] && ok "hostile answers: cuasyncctl not run" ||
	bad "hostile answers ran cuasyncctl: $(tail -n +$((n0 + 1)) "$d/ctl.log")"

# A pod goes; another is re-created under its name; a new one comes: the sidecar still works.
G=$(pod team-g new uid-g Running 4 '' 1007)
C2=$(pod team-c infer uid-c2 Running 1 '"cuasync.io/uid":"2003"' "")
pods "$C2,$E,$F,$G"
wait_for ctl.log "[$url,'tenant','remove','team-a/trainer'] in lines" && ok "a pod that went: tenant remove"
wait_for ctl.log "[$url,'tenant','add','team-g/new','--uid','1007','--mem','50%','--weight','4'] in lines" &&
	ok "after the hostile answers a new pod still gets its tenant"
wait_for ctl.log "[$url,'tenant','add','team-c/infer','--uid','2003','--mem','12%','--weight','1'] in lines" &&
	python3 - "$d/ctl.log" <<'EOF' && ok "a pod re-created under its name: remove, then add" || bad "re-created pod"
import json, sys
l = [json.loads(x)[2:5] for x in open(sys.argv[1])]
adds = [i for i, x in enumerate(l) if x == ["tenant", "add", "team-c/infer"]]
sys.exit(0 if len(adds) == 2 and adds[0] < l.index(["tenant", "remove", "team-c/infer"]) < adds[1] else 1)
EOF

n1=$(wc -l <"$d/ctl.log")
kill -TERM $side
rc=0
wait $side || rc=$?
side=
[ $rc = 0 ] && [ "$(wc -l <"$d/ctl.log")" = "$n1" ] && ok "SIGTERM: exit 0, tenants left to their pods" ||
	bad "SIGTERM: exit $rc"
grep -q 'stopping' "$d/sidecar.log" || bad "no stopping line"

# A server whose certificate the CA does not sign: logged, no request trusted, no tenant. (Its own cuasyncctl
# log in $d/other: the fake writes where it is told.)
mkdir "$d/other"
printf '#!/bin/sh\nexec python3 "%s" ctl "%s" "$@"\n' "$fake" "$d/other" >"$d/other/cuasyncctl"
chmod +x "$d/other/cuasyncctl"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca -keyout "$d/other/ca.key" \
	-out "$d/other/ca.crt" 2>/dev/null
"$sidecar" --node node-1 --api-server "https://localhost:$port" --ca-file "$d/other/ca.crt" \
	--token-file "$d/token" --cuasyncctl "$d/other/cuasyncctl" --interval-ms 50 >"$d/other.log" 2>&1 &
side=$!
i=0
until [ "$(grep -c 'pods: GET' "$d/other.log")" -ge 2 ]; do
	i=$((i + 1))
	[ $i -le 400 ] && kill -0 $side 2>/dev/null || break
	sleep 0.05
done
kill -TERM $side
rc=0
wait $side || rc=$?
side=
if [ $rc = 0 ] && grep -q 'PATCH capacity: .*TLS handshake' "$d/other.log" && grep -q 'pods: GET.*TLS handshake' "$d/other.log" &&
	! grep -q '"add"' "$d/other/ctl.log" 2>/dev/null; then
	ok "a server certificate from another CA: refused, logged, no tenant"
else bad "wrong CA: rc $rc: $(head -5 "$d/other.log")"; fi

# The manifests.
if python3 -c 'import yaml' 2>/dev/null; then
	python3 "$srcdir/tests/integration/check_k8s_manifests.py" "$srcdir/deploy/kubernetes" && ok "manifests" ||
		bad "manifests (check_k8s_manifests.py)"
else echo "note: python3-yaml is missing: manifests not checked"; fi
if command -v yamllint >/dev/null; then
	yamllint -s -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable}}' \
		"$srcdir"/deploy/kubernetes/*.yaml && ok "yamllint" || bad "yamllint"
else echo "note: yamllint is missing: not run"; fi

if [ $fails -ne 0 ]; then
	echo "--- sidecar log"
	cat "$d/sidecar.log"
	exit 1
fi
echo "PASS: test_k8s_sidecar"
