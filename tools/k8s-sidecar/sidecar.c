/*
 * cuasync-k8s-sidecar — runs beside cuasyncd in its DaemonSet pod (deploy/kubernetes/): advertises the node's
 * cuasyncd shares as the extended resource cuasync.io/shares (a JSON patch of the node's status, the path the
 * Kubernetes documentation gives for extended resources), and keeps one cuasyncd tenant per pod of the node that
 * requests shares, through `cuasyncctl tenant add|remove` (fork/exec with an argv: no shell ever parses a pod's
 * annotations). deploy/kubernetes/README.md is the operator's side of this file.
 *
 * One thread, one loop: every --interval-ms, patch the node's capacity when due, list the node's pods, add a
 * tenant for each pod that is new, remove the tenant of each pod that went. A failed or hostile answer from the
 * API server or the kubelet is logged and changes nothing (no tenant is removed on a list that did not parse).
 */
#include "kube_http.h"

#include "cua_log.h"

#include <jansson.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RESOURCE "cuasync.io/shares"
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define TENANT_NAME_MAX 64 /* CUA_MAX_TENANT_NAME (common/cua_proto.h) */
#define MAX_PODS 1024      /* pods tracked on one node (the kubelet's default is 110) */
#define RETRY_ROUNDS 12    /* rounds before a failed `tenant add` is tried again */
#define PATCH_EVERY_S 60   /* the capacity is patched again this often, in case the node object was recreated */
#define CTL_OUTPUT_MAX 4096
#define CTL_TIMEOUT_S 30 /* a cuasyncctl run, at most */

/* ------------------------------------------------------------------ options */

struct opts {
	const char *node, *api, *pods_url, *token_file, *ca_file, *pods_ca_file, *ctl, *operator_url, *log_level;
	const char *shares_s, *interval_s, *max_body_s;
	const char *pods_insecure_s;
	unsigned shares, interval_ms;
	size_t max_body;
	bool pods_insecure;
};

/* One row per option: its flag, the environment variable that sets it when the flag is absent, where it goes,
 * and its help line. A flag without an argument is a boolean ("1" when given). */
static const struct opt_row {
	const char *flag, *env;
	size_t off;
	bool has_arg;
	const char *help;
} opt_rows[] = {
	{"node", "NODE_NAME", offsetof(struct opts, node), true, "this node's name (required; the downward API)"},
	{"shares", "CUASYNC_SHARES", offsetof(struct opts, shares_s), true, "shares advertised (default 8)"},
	{"api-server", "CUASYNC_API_SERVER", offsetof(struct opts, api), true,
	 "API server URL (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)"},
	{"pods-url", "CUASYNC_PODS_URL", offsetof(struct opts, pods_url), true,
	 "the node's pod list (default API/api/v1/pods?fieldSelector=spec.nodeName%3DNODE; "
	 "the kubelet's: https://NODE_IP:10250/pods)"},
	{"token-file", "CUASYNC_TOKEN_FILE", offsetof(struct opts, token_file), true,
	 "bearer token, read at every request (default " SA_DIR "/token)"},
	{"ca-file", "CUASYNC_CA_FILE", offsetof(struct opts, ca_file), true,
	 "API server CA (default " SA_DIR "/ca.crt)"},
	{"pods-ca-file", "CUASYNC_PODS_CA_FILE", offsetof(struct opts, pods_ca_file), true,
	 "CA of --pods-url (default --ca-file)"},
	{"pods-insecure", "CUASYNC_PODS_INSECURE", offsetof(struct opts, pods_insecure_s), false,
	 "do not verify --pods-url's certificate (a kubelet's self-signed one)"},
	{"cuasyncctl", "CUASYNC_CTL", offsetof(struct opts, ctl), true, "cuasyncctl to run (default: on PATH)"},
	{"operator-url", "CUASYNC_OPERATOR_URL", offsetof(struct opts, operator_url), true,
	 "passed to cuasyncctl --url (default: cuasyncctl's)"},
	{"interval-ms", "CUASYNC_INTERVAL_MS", offsetof(struct opts, interval_s), true, "poll period (default 5000)"},
	{"max-body", "CUASYNC_MAX_BODY", offsetof(struct opts, max_body_s), true,
	 "largest API response read, bytes (default 16777216)"},
	{"log-level", "CUASYNC_LOG_LEVEL", offsetof(struct opts, log_level), true, "error, warn, info, debug"},
};
#define NOPTS (sizeof(opt_rows) / sizeof(opt_rows[0]))

static void
usage(FILE *f)
{
	fprintf(f, "usage: cuasync-k8s-sidecar [OPTION]...\n");
	for (size_t i = 0; i < NOPTS; i++)
		fprintf(f, "  --%s%s  (env %s) %s\n", opt_rows[i].flag, opt_rows[i].has_arg ? " VALUE" : "",
			opt_rows[i].env, opt_rows[i].help);
}

static int
parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	errno = 0;
	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return -1;
	*out = v;
	return 0;
}

static char api_default[300], pods_default[600];

/* Flags, then the environment for what they left unset, then defaults. Returns 0, 1 (--help) or 2 (bad use). */
static int
parse_opts(int argc, char **argv, struct opts *o)
{
	struct option lo[NOPTS + 2];
	for (size_t i = 0; i < NOPTS; i++)
		lo[i] = (struct option){opt_rows[i].flag, opt_rows[i].has_arg ? required_argument : no_argument, NULL,
					(int)i + 256};
	lo[NOPTS] = (struct option){"help", no_argument, NULL, 'h'};
	lo[NOPTS + 1] = (struct option){0};
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (c < 256 || c >= 256 + (int)NOPTS)
			return 2;
		const char *v = optarg != NULL ? optarg : "1";
		memcpy((char *)o + opt_rows[c - 256].off, &v, sizeof(v)); /* memcpy: the field's alignment is its own */
	}
	if (optind != argc)
		return 2;
	for (size_t i = 0; i < NOPTS; i++) {
		const char *v, *env = getenv(opt_rows[i].env);
		memcpy(&v, (char *)o + opt_rows[i].off, sizeof(v));
		if (v == NULL && env != NULL && *env != '\0')
			memcpy((char *)o + opt_rows[i].off, &env, sizeof(env));
	}
	unsigned long long v;
	/* The node's name goes into URLs as it is: a DNS subdomain name ([a-z0-9.-]) needs no escaping. */
	if (o->node == NULL || strlen(o->node) > 253 ||
	    strspn(o->node, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(o->node) || *o->node == '\0') {
		fprintf(stderr, "cuasync-k8s-sidecar: --node (or NODE_NAME) is required: a node name, [a-z0-9.-]\n");
		return 2;
	}
	if (parse_uint(o->shares_s ? o->shares_s : "8", 1000000, &v) != 0 || v == 0) {
		fprintf(stderr, "cuasync-k8s-sidecar: --shares: a whole number from 1 to 1000000\n");
		return 2;
	}
	o->shares = (unsigned)v;
	if (parse_uint(o->interval_s ? o->interval_s : "5000", 3600000, &v) != 0 || v < 10) {
		fprintf(stderr, "cuasync-k8s-sidecar: --interval-ms: from 10 to 3600000\n");
		return 2;
	}
	o->interval_ms = (unsigned)v;
	if (parse_uint(o->max_body_s ? o->max_body_s : "16777216", 1ull << 30, &v) != 0 || v < 1024) {
		fprintf(stderr, "cuasync-k8s-sidecar: --max-body: from 1024 to 1073741824 bytes\n");
		return 2;
	}
	o->max_body = (size_t)v;
	o->pods_insecure = o->pods_insecure_s != NULL && strcmp(o->pods_insecure_s, "0") != 0;
	if (o->api == NULL) {
		const char *h = getenv("KUBERNETES_SERVICE_HOST"), *p = getenv("KUBERNETES_SERVICE_PORT");
		if (h == NULL || p == NULL) {
			fprintf(stderr, "cuasync-k8s-sidecar: --api-server is required outside a pod\n");
			return 2;
		}
		snprintf(api_default, sizeof(api_default), strchr(h, ':') ? "https://[%s]:%s" : "https://%s:%s", h, p);
		o->api = api_default;
	}
	if (o->pods_url == NULL) {
		snprintf(pods_default, sizeof(pods_default), "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", o->api,
			 o->node);
		o->pods_url = pods_default;
	}
	o->token_file = o->token_file ? o->token_file : SA_DIR "/token";
	o->ca_file = o->ca_file ? o->ca_file : SA_DIR "/ca.crt";
	o->pods_ca_file = o->pods_ca_file ? o->pods_ca_file : o->ca_file;
	o->ctl = o->ctl ? o->ctl : "cuasyncctl";
	if (o->log_level != NULL && cua_log_parse_level(o->log_level) < 0) {
		fprintf(stderr, "cuasync-k8s-sidecar: --log-level: error, warn, info or debug\n");
		return 2;
	}
	return 0;
}

/* ------------------------------------------------------------------ cuasyncctl */

/* Runs cuasyncctl with args (NULL-terminated, after the optional --url), its stdout and stderr captured into
 * out (cap bytes, NUL-terminated, the rest read and dropped). Returns its exit status, or -1 when it did not
 * run or died of a signal. */
static int
run_ctl(const struct opts *o, const char *const *args, char *out, size_t cap)
{
	const char *argv[32];
	size_t n = 0;
	argv[n++] = o->ctl;
	if (o->operator_url != NULL) {
		argv[n++] = "--url";
		argv[n++] = o->operator_url;
	}
	for (size_t i = 0; args[i] != NULL && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	out[0] = '\0';
	int fd[2];
	if (pipe(fd) != 0) {
		log_error("pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
	posix_spawn_file_actions_addclose(&fa, fd[0]);
	posix_spawn_file_actions_addclose(&fa, fd[1]);
	pid_t pid;
	int rc = posix_spawnp(&pid, o->ctl, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (rc != 0) {
		close(fd[0]);
		log_error("cannot run %s: %s", o->ctl, strerror(rc));
		return -1;
	}
	size_t len = 0;
	char drop[512];
	time_t deadline = time(NULL) + CTL_TIMEOUT_S;
	for (;;) {
		/* A cuasyncctl that hangs (a daemon that never answers) must not stop the loop: killed at the deadline. */
		struct pollfd pfd = {.fd = fd[0], .events = POLLIN};
		time_t left = deadline - time(NULL);
		int pr = left > 0 ? poll(&pfd, 1, (int)left * 1000) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			log_error("%s ran over %d s: killed", o->ctl, CTL_TIMEOUT_S);
			kill(pid, SIGKILL);
			break;
		}
		ssize_t k = len + 1 < cap ? read(fd[0], out + len, cap - 1 - len) : read(fd[0], drop, sizeof(drop));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		if (len + 1 < cap)
			len += (size_t)k;
	}
	out[len] = '\0';
	close(fd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------------ the tenants this sidecar keeps */

enum rec_state { REC_REGISTERED, REC_FAILED, REC_REFUSED };

struct rec {
	char name[TENANT_NAME_MAX + 1];
	char pod_uid[64]; /* metadata.uid: a pod re-created under the same name is a new tenant; "" when adopted */
	enum rec_state state;
	unsigned long retry_round; /* REC_FAILED: the round `tenant add` is tried again */
	bool seen;                 /* in this round's pod list */
};

static struct rec recs[MAX_PODS];
static size_t nrecs;
static unsigned long round_no;

static struct rec *
rec_find(const char *name)
{
	for (size_t i = 0; i < nrecs; i++)
		if (strcmp(recs[i].name, name) == 0)
			return &recs[i];
	return NULL;
}

static struct rec *
rec_add(const char *name, const char *uid, enum rec_state st)
{
	if (nrecs == MAX_PODS) {
		log_error("more than %d pods with %s on this node: %s is not tracked", MAX_PODS, RESOURCE, name);
		return NULL;
	}
	struct rec *r = &recs[nrecs++];
	*r = (struct rec){.state = st, .seen = true};
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", uid);
	return r;
}

static void
rec_drop(struct rec *r)
{
	*r = recs[--nrecs];
}

/* At start: the tenants a previous run of the sidecar registered (their names hold a '/', which a
 * configuration file's [tenant NAME] of ours never does), so that those whose pod went while it was down are
 * removed. Best effort: a daemon that does not answer, or a list in an unexpected shape, is logged. */
static void
adopt_tenants(const struct opts *o)
{
	static char out[1 << 20];
	const char *args[] = {"--json", "tenant", "list", NULL};
	int rc = run_ctl(o, args, out, sizeof(out));
	json_error_t err;
	json_t *j = rc == 0 ? json_loads(out, JSON_REJECT_DUPLICATES, &err) : NULL;
	json_t *list = json_is_array(j) ? j : json_object_get(j, "tenants");
	if (!json_is_array(list)) {
		log_warn("tenant list (exit %d) gave no JSON list of tenants: tenants of pods gone while the sidecar "
			 "was down stay until removed by hand (cuasyncctl tenant remove NAME)",
			 rc);
		json_decref(j);
		return;
	}
	size_t i;
	json_t *t;
	json_array_foreach(list, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		if (name != NULL && strchr(name, '/') != NULL && strlen(name) <= TENANT_NAME_MAX && !rec_find(name) &&
		    rec_add(name, "", REC_REGISTERED) != NULL)
			log_info("adopted tenant %s (registered before this start)", name);
	}
	json_decref(j);
}

/* ------------------------------------------------------------------ pods */

/* Annotations copied to `tenant add` options: cuasync.io/KEY VALUE becomes --KEY VALUE (the [tenant] keys of
 * cuasyncd.conf(5)). */
static const char *const annotation_keys[] = {"mem",     "streams",      "sessions",   "weight",
					      "modules", "module-bytes", "host-bytes", "graph-bytes",
					      "workers", "in-flight",    "isolation"};
#define NANN (sizeof(annotation_keys) / sizeof(annotation_keys[0]))

/* A value a pod may put in an annotation: 1 to 32 of [A-Za-z0-9.%]. Anything else (a leading '-', a blank, a
 * quote) is refused, although it reaches cuasyncctl as one argv element and no shell: the daemon's parser is
 * the place for the value's meaning, this is only its shape. */
static bool
value_ok(const char *v)
{
	size_t n = strlen(v);
	return n >= 1 && n <= 32 && strspn(v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.%") == n;
}

/* A Kubernetes namespace or pod name: [a-z0-9.-], 1 to 253 bytes (DNS subdomain names). */
static bool
k8s_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= 253 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n;
}

/* namespace/pod, or, when that is over the daemon's 64 bytes, its first 55 bytes, '~' and the FNV-1a hash of
 * the whole name in 8 hex digits (deploy/kubernetes/README.md: "Tenant names"). */
static void
tenant_name(const char *ns, const char *pod, char *out)
{
	char full[512];
	int n = snprintf(full, sizeof(full), "%s/%s", ns, pod);
	if (n <= TENANT_NAME_MAX) {
		memcpy(out, full, (size_t)n + 1);
		return;
	}
	uint32_t h = 2166136261u;
	for (const char *p = full; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(out, TENANT_NAME_MAX + 1, "%.55s~%08x", full, h);
}

/* The shares a pod asks for: the sum over its containers of limits (else requests) of RESOURCE, an integer
 * quantity. -1: a value that is not one (the pod is refused, logged). */
static long
pod_shares(json_t *spec)
{
	long sum = 0;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(spec, "containers"), i, c)
	{
		json_t *res = json_object_get(c, "resources");
		json_t *q = json_object_get(json_object_get(res, "limits"), RESOURCE);
		if (q == NULL)
			q = json_object_get(json_object_get(res, "requests"), RESOURCE);
		if (q == NULL)
			continue;
		unsigned long long v;
		if (parse_uint(json_string_value(q), 1000000, &v) != 0)
			return -1;
		sum += (long)v;
		if (sum > 1000000)
			return -1;
	}
	return sum;
}

/* The uid the pod's processes run as: annotation cuasync.io/uid, else spec.securityContext.runAsUser. */
static bool
pod_uid_of(json_t *spec, json_t *ann, char *out, size_t cap)
{
	const char *a = json_string_value(json_object_get(ann, "cuasync.io/uid"));
	unsigned long long v;
	if (a != NULL)
		return parse_uint(a, UINT32_MAX - 1, &v) == 0 && snprintf(out, cap, "%llu", v) > 0;
	json_t *u = json_object_get(json_object_get(spec, "securityContext"), "runAsUser");
	if (!json_is_integer(u) || json_integer_value(u) < 0 || json_integer_value(u) >= (json_int_t)UINT32_MAX)
		return false;
	snprintf(out, cap, "%lld", (long long)json_integer_value(u));
	return true;
}

/* `tenant add` for one pod. Returns 0 when the tenant is there (added, or it existed). */
static int
tenant_add(const struct opts *o, const char *name, const char *uid, long shares, json_t *ann, char *why, size_t whylen)
{
	const char *args[8 + 2 * NANN + 4];
	size_t n = 0;
	char mem[16], weight[16], out[CTL_OUTPUT_MAX];
	args[n++] = "tenant";
	args[n++] = "add";
	args[n++] = name;
	args[n++] = "--uid";
	args[n++] = uid;
	bool has_mem = false, has_weight = false;
	char flags[NANN][24];
	for (size_t k = 0; k < NANN; k++) {
		char key[64];
		snprintf(key, sizeof(key), "cuasync.io/%s", annotation_keys[k]);
		json_t *jv = json_object_get(ann, key);
		if (jv == NULL)
			continue;
		const char *v = json_string_value(jv);
		if (v == NULL || !value_ok(v)) {
			snprintf(why, whylen, "annotation %s: not 1 to 32 of [A-Za-z0-9.%%]", key);
			return -1;
		}
		snprintf(flags[k], sizeof(flags[k]), "--%s", annotation_keys[k]);
		args[n++] = flags[k];
		args[n++] = v;
		has_mem |= strcmp(annotation_keys[k], "mem") == 0;
		has_weight |= strcmp(annotation_keys[k], "weight") == 0;
	}
	/* Without annotations, the shares decide: shares/total of each device's memory, and weight = shares. */
	if (!has_mem) {
		long pct = shares * 100 / o->shares;
		snprintf(mem, sizeof(mem), "%ld%%", pct < 1 ? 1 : pct > 100 ? 100 : pct);
		args[n++] = "--mem";
		args[n++] = mem;
	}
	if (!has_weight) {
		snprintf(weight, sizeof(weight), "%ld", shares > 1000 ? 1000 : shares);
		args[n++] = "--weight";
		args[n++] = weight;
	}
	args[n] = NULL;
	int rc = run_ctl(o, args, out, sizeof(out));
	if (rc == 0 || (rc == 1 && strstr(out, "EXISTS") != NULL))
		return 0;
	snprintf(why, whylen, "cuasyncctl tenant add exited %d: %.200s", rc, out);
	return -1;
}

/* `tenant remove`. Returns 0 when the tenant is gone (removed, or NOT_FOUND). */
static int
tenant_remove(const struct opts *o, const char *name)
{
	char out[CTL_OUTPUT_MAX];
	const char *args[] = {"tenant", "remove", name, NULL};
	int rc = run_ctl(o, args, out, sizeof(out));
	if (rc == 0 || (rc == 1 && strstr(out, "NOT_FOUND") != NULL)) {
		log_info("tenant %s removed (its pod is gone)", name);
		return 0;
	}
	log_warn("tenant %s: cuasyncctl tenant remove exited %d: %.200s (tried again next round)", name, rc, out);
	return -1;
}

/* One pod of the list: its tenant added when new. Returns false when the item is malformed (counted). */
static bool
one_pod(const struct opts *o, json_t *pod)
{
	json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
	json_t *ann = json_object_get(meta, "annotations");
	const char *ns = json_string_value(json_object_get(meta, "namespace"));
	const char *pname = json_string_value(json_object_get(meta, "name"));
	const char *puid = json_string_value(json_object_get(meta, "uid"));
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
	if (!json_is_object(meta) || !json_is_object(spec) || (ann != NULL && !json_is_object(ann)) ||
	    !k8s_name_ok(ns) || !k8s_name_ok(pname) || puid == NULL || strlen(puid) >= 64 ||
	    (json_object_get(spec, "containers") != NULL && !json_is_array(json_object_get(spec, "containers"))))
		return false;
	/* Pending too: the tenant is there before the pod's containers start and connect. */
	if (phase != NULL && strcmp(phase, "Pending") != 0 && strcmp(phase, "Running") != 0)
		return true; /* Succeeded, Failed: as if gone (not marked seen) */
	long shares = pod_shares(spec);
	if (shares < 0)
		return false;
	if (shares == 0)
		return true;
	char name[TENANT_NAME_MAX + 1], uid[16], why[400];
	tenant_name(ns, pname, name);
	struct rec *r = rec_find(name);
	if (r != NULL && r->pod_uid[0] != '\0' && strcmp(r->pod_uid, puid) != 0) { /* re-created under its name */
		if (r->state == REC_REGISTERED && tenant_remove(o, name) != 0) {
			r->seen = true;
			return true;
		}
		rec_drop(r);
		r = NULL;
	}
	if (r != NULL) {
		r->seen = true;
		if (r->pod_uid[0] == '\0')
			snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", puid);
		if (r->state != REC_FAILED || round_no < r->retry_round)
			return true;
	}
	int rc;
	if (!pod_uid_of(spec, ann, uid, sizeof(uid))) {
		snprintf(why, sizeof(why), "no uid: set spec.securityContext.runAsUser or annotation cuasync.io/uid");
		rc = -1;
	} else {
		rc = tenant_add(o, name, uid, shares, ann, why, sizeof(why));
	}
	if (rc == 0)
		log_info("tenant %s added (pod %s/%s, uid %s, %ld of %u shares)", name, ns, pname, uid, shares,
			 o->shares);
	else
		log_warn("pod %s/%s (%ld shares): no tenant: %s", ns, pname, shares, why);
	if (r == NULL)
		r = rec_add(name, puid, REC_REGISTERED);
	if (r != NULL) {
		r->state = rc == 0 ? REC_REGISTERED : REC_FAILED;
		r->retry_round = round_no + RETRY_ROUNDS;
	}
	return true;
}

static char *
read_token(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	char *buf = calloc(1, 8192);
	size_t n = buf ? fread(buf, 1, 8191, f) : 0;
	fclose(f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf;
}

static void
free_token(char *t)
{
	if (t != NULL)
		explicit_bzero(t, strlen(t));
	free(t);
}

/* The pod list, parsed and checked; NULL (logged) when it cannot be trusted as the whole list. */
static json_t *
list_pods(const struct opts *o, const char *token)
{
	struct kube_tls tls = {o->pods_ca_file, o->pods_insecure};
	struct kube_resp r;
	if (kube_http("GET", o->pods_url, &tls, token, NULL, NULL, o->max_body, 30000, &r) != 0) {
		log_error("pods: GET %s: %s", o->pods_url, r.why);
		return NULL;
	}
	if (r.status != 200) {
		log_error("pods: GET %s: HTTP %d: %.300s", o->pods_url, r.status, r.body);
		kube_resp_free(&r);
		return NULL;
	}
	json_error_t err;
	json_t *j = json_loadb(r.body, r.len, JSON_REJECT_DUPLICATES, &err);
	kube_resp_free(&r);
	if (j == NULL) {
		log_error("pods: GET %s: not JSON (line %d: %s)", o->pods_url, err.line, err.text);
		return NULL;
	}
	if (!json_is_object(j) || !json_is_array(json_object_get(j, "items"))) {
		log_error("pods: GET %s: not a pod list (no .items array)", o->pods_url);
		json_decref(j);
		return NULL;
	}
	return j;
}

static void
reconcile(const struct opts *o, const char *token)
{
	json_t *list = list_pods(o, token);
	if (list == NULL)
		return; /* nothing is removed on a list that cannot be trusted */
	for (size_t i = 0; i < nrecs; i++)
		recs[i].seen = false;
	size_t i, bad = 0;
	json_t *pod;
	json_array_foreach(json_object_get(list, "items"), i, pod) bad += !one_pod(o, pod);
	json_decref(list);
	static size_t last_bad;
	if (bad != 0 && bad != last_bad) /* once per change, not every round */
		log_warn("pods: %zu item(s) of the list malformed (a name, uid, container or %s of the wrong "
			 "type or shape): skipped, and no tenant removed this round",
			 bad, RESOURCE);
	last_bad = bad;
	if (bad != 0)
		return; /* a malformed item may be a pod whose tenant would go: remove nothing on such a list */
	for (size_t k = nrecs; k-- > 0;) {
		if (recs[k].seen)
			continue;
		if (recs[k].state != REC_REGISTERED || tenant_remove(o, recs[k].name) == 0)
			rec_drop(&recs[k]);
	}
}

/* The documented way to advertise an extended resource: a JSON patch of status.capacity ('/' as "~1"). */
static bool
patch_capacity(const struct opts *o, const char *token)
{
	char url[600], body[200];
	snprintf(url, sizeof(url), "%s/api/v1/nodes/%s/status", o->api, o->node);
	snprintf(body, sizeof(body),
		 "[{\"op\":\"add\",\"path\":\"/status/capacity/cuasync.io~1shares\",\"value\":\"%u\"}]", o->shares);
	struct kube_tls tls = {o->ca_file, 0};
	struct kube_resp r;
	if (kube_http("PATCH", url, &tls, token, "application/json-patch+json", body, 65536, 30000, &r) != 0) {
		log_error("node %s: PATCH capacity: %s", o->node, r.why);
		return false;
	}
	bool ok = r.status == 200;
	if (ok)
		log_debug("node %s: capacity %s = %u", o->node, RESOURCE, o->shares);
	else
		log_error("node %s: PATCH capacity: HTTP %d: %.300s", o->node, r.status, r.body);
	kube_resp_free(&r);
	return ok;
}

static volatile sig_atomic_t stopping;

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

int
main(int argc, char **argv)
{
	struct opts o = {0};
	int rc = parse_opts(argc, argv, &o);
	if (rc == 1)
		usage(stdout);
	else if (rc == 2)
		fprintf(stderr, "cuasync-k8s-sidecar: the options are in --help\n");
	if (rc != 0)
		return rc == 1 ? 0 : 2;
	cua_log_set_ident("cuasync-k8s-sidecar");
	cua_log_set_level(o.log_level ? cua_log_parse_level(o.log_level) : CUA_LOG_INFO);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o.pods_insecure)
		log_warn("--pods-insecure: the pod list's server is not authenticated");
	log_info("node %s: %u shares; pods from %s", o.node, o.shares, o.pods_url);
	adopt_tenants(&o);
	time_t patched = 0;
	bool patched_ok = false;
	for (round_no = 1; !stopping; round_no++) {
		char *token = read_token(o.token_file);
		if (token == NULL)
			log_warn("token file %s: %s (requests go without a token)", o.token_file, strerror(errno));
		time_t now = time(NULL);
		if (!patched_ok || now - patched >= PATCH_EVERY_S) {
			bool ok = patch_capacity(&o, token);
			if (ok && !patched_ok)
				log_info("node %s: advertising %s = %u", o.node, RESOURCE, o.shares);
			patched_ok = ok;
			patched = now;
		}
		reconcile(&o, token);
		free_token(token);
		struct timespec ts = {o.interval_ms / 1000, (long)(o.interval_ms % 1000) * 1000000L};
		while (!stopping && nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	log_info("stopping: tenants stay registered (their pods run on; a restarted sidecar adopts them)");
	return 0;
}
