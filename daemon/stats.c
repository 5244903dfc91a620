/*
 * stats.c — the monitoring counters (see stats.h): counted under fe->lock where requests finish, copied out
 * in one snapshot, formatted as Prometheus text (format 0.0.4) without the lock.
 */
#include "config.h"

#include "devlink.h"
#include "request.h"
#include "stats.h"
#include "tenant.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Upper bounds of the latency buckets, in nanoseconds and as Prometheus writes them (seconds). */
static const struct {
	uint64_t ns;
	const char *le;
} buckets[STATS_NBUCKETS] = {
	{50000, "5e-05"},    {100000, "0.0001"},  {250000, "0.00025"}, {500000, "0.0005"},  {1000000, "0.001"},
	{2500000, "0.0025"}, {5000000, "0.005"},  {10000000, "0.01"},  {25000000, "0.025"}, {50000000, "0.05"},
	{100000000, "0.1"},  {250000000, "0.25"}, {500000000, "0.5"},  {1000000000, "1"},   {2500000000, "2.5"},
	{5000000000, "5"},   {10000000000, "10"},
};

static const char *const family_names[SF_NFAMILIES] = {NULL,     "info",   "operator", "module", "memory", "copy",
						       "stream", "launch", "batch",    "event",  "graph"};
static const char *const dir_names[SD_NDIRS] = {"htod", "dtoh", "dtod"};

void
do_stats_request(struct fe *fe, uint32_t op, enum stats_family fam, uint32_t status, uint64_t lat_ns)
{
	struct stats *st = &fe->stats;
	st->requests[op < CUA_OP_MAX ? op : 0][status < STATS_NSTATUS ? status : CUA_EINTERNAL]++;
	if (lat_ns == UINT64_MAX)
		return;
	struct stats_hist *h = &st->latency[fam < SF_NFAMILIES ? fam : SF_INFO];
	h->count++;
	h->sum_ns += lat_ns;
	for (int i = 0; i < STATS_NBUCKETS; i++)
		if (lat_ns <= buckets[i].ns) {
			h->bucket[i]++;
			break;
		}
}

static const char *const hop_names[STATS_NHOPS] = {"admit", "to_worker", "issue", "device", "to_front", "reply"};

void
do_stats_hops(struct fe *fe, const struct request *r, uint64_t reply_ns)
{
	/* one launch that ran, every stamp in order (a worker restarted in between, or a request that never
	 * reached one, is left out) */
	/* libcuasync sends a lone launch as a BATCH of one */
	bool one = r->op == CUA_OP_LAUNCH || (r->op == CUA_OP_BATCH && r->decoded && r->w.body.batch.nitems == 1 &&
					      r->w.body.batch.items[0].kind == CUA_OP_LAUNCH);
	if (!one || r->nitems != 1 || r->items[0].status != CUA_OK || reply_ns <= r->recv_ns)
		return;
	uint64_t t[STATS_NHOPS + 1] = {0};
	for (int i = 0; i < STATS_NHOPS - 1; i++)
		t[i + 1] = r->hop_ns[i];
	t[STATS_NHOPS] = reply_ns - r->recv_ns;
	for (int i = 0; i < STATS_NHOPS; i++)
		if (t[i + 1] == 0 || t[i + 1] < t[i])
			return;
	struct stats_hops *h = &fe->stats.hops;
	h->count++;
	for (int i = 0; i < STATS_NHOPS; i++)
		h->sum_ns[i] += t[i + 1] - t[i];
}

void
do_stats_tenant(struct fe *fe, const char *tenant, enum stats_family fam, uint32_t status)
{
	struct stats *st = &fe->stats;
	struct stats_tenant_ctr *t = NULL;
	if (tenant == NULL)
		return;
	for (uint32_t i = 0; i < st->ntenant && t == NULL; i++) /* a few tenants: a scan beats a hash */
		if (strcmp(st->tenant[i].name, tenant) == 0)
			t = &st->tenant[i];
	if (t == NULL) {
		if (st->ntenant == st->cap_tenant) {
			uint32_t cap = st->cap_tenant ? 2 * st->cap_tenant : 8;
			struct stats_tenant_ctr *grown = realloc(st->tenant, cap * sizeof(*grown));
			if (grown == NULL)
				return;
			st->tenant = grown;
			st->cap_tenant = cap;
		}
		t = &st->tenant[st->ntenant++];
		memset(t, 0, sizeof(*t));
		snprintf(t->name, sizeof(t->name), "%s", tenant);
	}
	t->requests[fam < SF_NFAMILIES ? fam : SF_INFO]++;
	if (status != CUA_OK)
		t->errors[status < STATS_NSTATUS ? status : CUA_EINTERNAL]++;
}

void
stats_fini(struct stats *st)
{
	free(st->tenant);
	st->tenant = NULL;
	st->ntenant = st->cap_tenant = 0;
}

/* ------------------------------------------------------------------ process */

/* The process_ series of Prometheus's client libraries, from /proc/self (proc(5)). */
static void
snap_process(struct stats_snap *snap)
{
	char buf[2048];
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f != NULL)
		fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* past the command name, which may hold blanks and parentheses */
	unsigned long utime = 0, stime = 0, vsize = 0;
	unsigned long long start = 0;
	long rss = 0;
	/* fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
	 * cstime priority nice threads itrealvalue starttime vsize rss */
	if (p == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
		   &utime, &stime, &start, &vsize, &rss) != 5)
		return;
	double tck = (double)sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long btime = 0;
	if ((f = fopen("/proc/stat", "re")) != NULL) {
		while (fgets(buf, sizeof(buf), f) != NULL && sscanf(buf, "btime %llu", &btime) != 1)
			;
		fclose(f);
	}
	uint64_t fds = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
		fds += e->d_name[0] != '.';
	if (d != NULL) {
		closedir(d);
		fds--; /* the directory's own descriptor */
	}
	struct rlimit rl = {0, 0};
	getrlimit(RLIMIT_NOFILE, &rl);
	snap->proc.cpu_seconds = (double)(utime + stime) / tck;
	snap->proc.start_seconds = (double)btime + (double)start / tck;
	snap->proc.vsize_bytes = vsize;
	snap->proc.rss_bytes = (uint64_t)rss * (uint64_t)page;
	snap->proc.open_fds = fds;
	snap->proc.max_fds = rl.rlim_cur;
	snap->proc.ok = true;
}

/* ------------------------------------------------------------------ snapshot */

/* Adds s's usage to snap (and its row when rows are kept). */
static void
snap_session(struct fe *fe, const struct session *s, struct stats_snap *snap) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t dev_bytes = 0;
	for (int i = 0; i < fe->ndevs && i < (int)CUA_MAX_DEVICES; i++) {
		snap->dev[i].in_flight += s->dev_in_flight[i];
		snap->dev[i].mem_bytes += s->dev_bytes[i];
		dev_bytes += s->dev_bytes[i];
	}
	snap->host_bytes += s->host_bytes;
	if (snap->ten != NULL && s->tenant != NULL && s->hello && !s->closing && !s->pipe_gone) {
		struct stats_tenant *t = &snap->ten[s->tenant - fe->cfg.tenants->v];
		t->sessions++;
		t->dev_bytes += dev_bytes;
	}
	snap->queued += s->queued;
	snap->parked += s->nparked;
	snap->in_flight += s->in_flight;
	if (snap->sess == NULL || !s->hello || s->closing || s->pipe_gone)
		return;
	snap->sess[snap->nsess++] = (struct stats_session){s->id, s->requests, s->errors, dev_bytes, s->host_bytes,
							   (uint32_t)s->counts.streams, (uint32_t)s->counts.modules,
							   s->queued, s->nparked, s->in_flight, s->operator};
}

int
stats_snapshot(struct fe *fe, bool with_sessions, struct stats_snap *out)
{
	int rc = CUA_ENOMEM;
	const struct session *s;
	memset(out, 0, sizeof(*out));
	fe_lock(fe);
	if (with_sessions && (out->sess = calloc(fe->nsessions ? fe->nsessions : 1, sizeof(*out->sess))) == NULL)
		goto out;
	const struct tenant_table *T = fe->cfg.tenants;
	if (T != NULL && T->n > 0) {
		if ((out->ten = calloc(T->n, sizeof(*out->ten))) == NULL)
			goto out;
		out->nten = (uint32_t)T->n;
		for (size_t i = 0; i < T->n; i++) {
			snprintf(out->ten[i].name, sizeof(out->ten[i].name), "%s", T->v[i].name);
			out->ten[i].weight = T->v[i].weight;
			out->ten[i].busy_ns = T->v[i].busy_ns;
		}
	}
	out->c = fe->stats;
	out->c.tenant = NULL; /* the copy's rows are out->tctr */
	if (fe->stats.ntenant > 0) {
		if ((out->tctr = calloc(fe->stats.ntenant, sizeof(*out->tctr))) == NULL)
			goto out;
		memcpy(out->tctr, fe->stats.tenant, fe->stats.ntenant * sizeof(*out->tctr));
		out->ntctr = fe->stats.ntenant;
	}
	out->uptime_ms = cua_now_ms() - fe->start_ms;
	out->requests = fe->requests;
	out->errors = fe->errors;
	out->sessions_total = fe->next_session;
	out->sessions = do_sessions_live(fe);
	out->draining = fe->draining || atomic_load(&fe->stopping);
	out->ndevs = fe->ndevs < (int)CUA_MAX_DEVICES ? fe->ndevs : (int)CUA_MAX_DEVICES;
	for (int i = 0; i < out->ndevs; i++) {
		const struct device *d = &fe->devs[i];
		out->dev[i] = (struct stats_device){.generation = d->gen + d->session_restarts,
						    .restarts = d->restarts + d->session_restarts,
						    .total_bytes = d->info.total_mem,
						    .ready = d->state == DEV_READY,
						    .drained = (fe->drained >> i & 1u) != 0,
						    .spare_ready = d->spare_ready,
						    .spare_swaps = d->spare_swaps};
		memcpy(out->dev[i].model, d->info.name, sizeof(out->dev[i].model));
		out->dev[i].model[sizeof(out->dev[i].model) - 1] = '\0';
		snprintf(out->dev[i].uuid, sizeof(out->dev[i].uuid), "%s", d->uuid);
	}
	TAILQ_FOREACH(s, &fe->sessions, link)
	snap_session(fe, s, out);
	rc = 0;
out:
	fe_unlock(fe);
	if (rc == 0)
		snap_process(out);
	return rc;
}

void
stats_snap_free(struct stats_snap *snap)
{
	free(snap->sess);
	snap->sess = NULL;
	snap->nsess = 0;
	free(snap->ten);
	snap->ten = NULL;
	snap->nten = 0;
	free(snap->tctr);
	snap->tctr = NULL;
	snap->ntctr = 0;
}

void
stats_snap_aggregate(struct stats_snap *snap)
{
	stats_snap_free(snap); /* what it holds are the rows: the totals stay */
}

bool
stats_healthy(const struct stats_snap *snap, char *why, size_t len)
{
	int ready = 0;
	for (int i = 0; i < snap->ndevs; i++)
		ready += snap->dev[i].ready && !snap->dev[i].drained;
	if (snap->draining)
		snprintf(why, len, "shutting down");
	else if (ready == 0)
		snprintf(why, len,
			 "no device ready (%d device(s), none serving: starting, restarting, failed or drained)",
			 snap->ndevs);
	else
		snprintf(why, len, "ok");
	return !snap->draining && ready > 0;
}

/* ------------------------------------------------------------------ formatting */

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP cuasyncd_%s %s\n# TYPE cuasyncd_%s %s\n", name, help, name, type);
}

/* One sample: name{labels} value. labels: "" or `key="value",…` without braces (values escaped: label()). */
static void
sample(FILE *f, const char *name, const char *labels, unsigned long long v)
{
	fprintf(f, "cuasyncd_%s%s%s%s %llu\n", name, *labels ? "{" : "", labels, *labels ? "}" : "", v);
}

/* `key="value"` with the value escaped as the text format wants (backslash, quote, newline), cut to fit len. */
static void
label(char *l, size_t len, const char *key, const char *value)
{
	size_t o = (size_t)snprintf(l, len, "%s=\"", key);
	for (const char *p = value; *p && o + 4 < len; p++) {
		if (*p == '\\' || *p == '"' || *p == '\n')
			l[o++] = '\\';
		l[o++] = *p == '\n' ? 'n' : *p;
	}
	snprintf(l + o, len - o, "\"");
}

/* A device's labels: its index, dcgm-exporter's UUID (the same name and value: series join on it) and its name
 * as model_name (dcgm-exporter's modelName is camelCase, which promtool's lint rejects; its series give it to a
 * join with group_left). */
static void
device_labels(char *l, size_t len, const struct stats_snap *snap, int dev)
{
	char u[160], m[600];
	label(u, sizeof(u), "UUID", snap->dev[dev].uuid);
	label(m, sizeof(m), "model_name", snap->dev[dev].model);
	snprintf(l, len, "device=\"%d\",%s,%s", dev, u, m);
}

static void
fmt_requests(FILE *f, const struct stats_snap *snap)
{
	char l[96];
	head(f, "requests_total", "counter",
	     "Client requests answered, by request kind and status (a batch: the status of its first item that "
	     "failed).");
	for (uint32_t op = 0; op < CUA_OP_MAX; op++)
		for (uint32_t st = 0; st < STATS_NSTATUS; st++) {
			const char *on = op ? cua_op_name(op) : "UNKNOWN";
			if (on == NULL || (snap->c.requests[op][st] == 0 && (st != CUA_OK || op == 0)))
				continue; /* every kind's OK series is there from the start, so rates work */
			snprintf(l, sizeof(l), "op=\"%s\",status=\"%s\"", on, cua_strerror_name((int)st));
			sample(f, "requests_total", l, snap->c.requests[op][st]);
		}
	head(f, "messages_total", "counter", "Messages received on the client and operator endpoints.");
	sample(f, "messages_total", "", snap->requests);
	head(f, "errors_total", "counter",
	     "Requests answered with an error (a batch once, however many of its items failed).");
	sample(f, "errors_total", "", snap->errors);
	head(f, "requests_dropped_total", "counter",
	     "Requests dropped unanswered: their connection held twice --session-pending unread replies.");
	sample(f, "requests_dropped_total", "", snap->c.dropped);
}

static void
fmt_hops(FILE *f, const struct stats_snap *snap)
{
	char l[64];
	head(f, "launch_hop_seconds_total", "counter",
	     "Time launches spent in each hop through cuasyncd, summed over the launches answered after their kernel "
	     "ran (divide by cuasyncd_launch_hops_total for the mean): admit (received to its command written to the "
	     "worker), to_worker (to the worker taking it up), issue (to its kernel issued), device (to the worker's "
	     "completion: the GPU ran it and the worker noticed), to_front (to the front-end reading it), reply (to "
	     "its reply handed to the connection).");
	for (int i = 0; i < STATS_NHOPS; i++) {
		snprintf(l, sizeof(l), "hop=\"%s\"", hop_names[i]);
		fprintf(f, "cuasyncd_launch_hop_seconds_total{%s} %.9f\n", l, (double)snap->c.hops.sum_ns[i] / 1e9);
	}
	head(f, "launch_hops_total", "counter", "Launches counted in cuasyncd_launch_hop_seconds_total.");
	sample(f, "launch_hops_total", "", snap->c.hops.count);
}

static void
fmt_latency(FILE *f, const struct stats_snap *snap)
{
	char l[96];
	head(f, "request_duration_seconds", "histogram",
	     "Time from receiving a request to answering it (to its completion for fire-and-forget work), by "
	     "family of request kinds.");
	for (int fam = SF_NONE + 1; fam < SF_NFAMILIES; fam++) {
		const struct stats_hist *h = &snap->c.latency[fam];
		uint64_t cum = 0;
		for (int i = 0; i < STATS_NBUCKETS; i++) {
			cum += h->bucket[i];
			snprintf(l, sizeof(l), "family=\"%s\",le=\"%s\"", family_names[fam], buckets[i].le);
			sample(f, "request_duration_seconds_bucket", l, cum);
		}
		snprintf(l, sizeof(l), "family=\"%s\",le=\"+Inf\"", family_names[fam]);
		sample(f, "request_duration_seconds_bucket", l, h->count);
		fprintf(f, "cuasyncd_request_duration_seconds_sum{family=\"%s\"} %.9f\n", family_names[fam],
			(double)h->sum_ns / 1e9);
		snprintf(l, sizeof(l), "family=\"%s\"", family_names[fam]);
		sample(f, "request_duration_seconds_count", l, h->count);
	}
}

static void
fmt_work(FILE *f, const struct stats_snap *snap)
{
	char l[64];
	head(f, "launches_total", "counter", "Kernels launched (LAUNCH requests and batch items that ran).");
	sample(f, "launches_total", "", snap->c.launches);
	head(f, "copied_bytes_total", "counter", "Bytes copied by copies that succeeded, by direction.");
	for (int d = 0; d < SD_NDIRS; d++) {
		snprintf(l, sizeof(l), "direction=\"%s\"", dir_names[d]);
		sample(f, "copied_bytes_total", l, snap->c.copied[d]);
	}
	head(f, "host_buffer_copied_bytes_total", "counter",
	     "Of the bytes copied, those through shared host buffers (not through the socket), by direction.");
	for (int d = 0; d < SD_DTOD; d++) {
		snprintf(l, sizeof(l), "direction=\"%s\"", dir_names[d]);
		sample(f, "host_buffer_copied_bytes_total", l, snap->c.host_copied[d]);
	}
	head(f, "host_buffer_bytes", "gauge", "Registered (shared, page-locked on a GPU) host memory of all sessions.");
	sample(f, "host_buffer_bytes", "", snap->host_bytes);
	head(f, "requests_queued", "gauge", "Client requests validated and waiting for a worker.");
	sample(f, "requests_queued", "", snap->queued);
	head(f, "requests_parked", "gauge", "Ordered requests waiting for a missing sequence number.");
	sample(f, "requests_parked", "", snap->parked);
	head(f, "requests_in_flight", "gauge", "Requests inside the workers.");
	sample(f, "requests_in_flight", "", snap->in_flight);
}

static void
fmt_devices(FILE *f, const struct stats_snap *snap)
{
	static const struct {
		const char *name, *type, *help;
	} rows[] = {
		{"device_ready", "gauge", "1 when the device's worker serves, 0 while it starts, restarts or failed."},
		{"device_drained", "gauge", "1 when the operator drained the device (no new objects on it)."},
		{"device_memory_used_bytes", "gauge", "Device memory the sessions hold on the device."},
		{"device_memory_total_bytes", "gauge", "The device's memory."},
		{"device_requests_in_flight", "gauge", "Requests in the device's workers."},
		{"worker_restarts_total", "counter",
		 "Restarts of the device's workers, the shared one and each session's own (faults, deaths, watchdog)."},
		{"worker_generation", "gauge", "The device's current worker generation (1 at start)."},
		{"worker_spare_ready", "gauge",
		 "1 when a spare worker (--spare-worker) is started and ready to replace the device's shared worker."},
		{"worker_spare_swaps_total", "counter",
		 "Restarts of the device's shared worker that a ready spare worker served at once."},
	};
	char l[800];
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		head(f, rows[k].name, rows[k].type, rows[k].help);
		for (int i = 0; i < snap->ndevs; i++) {
			const struct stats_device *d = &snap->dev[i];
			const unsigned long long v[] = {d->ready,       d->drained,     d->mem_bytes,
							d->total_bytes, d->in_flight,   d->restarts,
							d->generation,  d->spare_ready, d->spare_swaps};
			device_labels(l, sizeof(l), snap, i);
			sample(f, rows[k].name, l, v[k]);
		}
	}
}

static void
fmt_sessions(FILE *f, const struct stats_snap *snap)
{
	static const char *const names[] = {"session_requests_total",
					    "session_errors_total",
					    "session_device_memory_bytes",
					    "session_host_buffer_bytes",
					    "session_streams",
					    "session_requests_in_flight"};
	static const char *const helps[] = {"Requests of the session.",
					    "Errors answered to the session.",
					    "Device memory the session holds (all devices).",
					    "Host memory the session registered.",
					    "Streams the session holds.",
					    "Requests of the session queued, parked or in a worker."};
	char l[48];
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		head(f, names[k], k < 2 ? "counter" : "gauge", helps[k]);
		for (uint32_t i = 0; i < snap->nsess; i++) {
			const struct stats_session *s = &snap->sess[i];
			const unsigned long long v[] = {s->requests,  s->errors,
							s->dev_bytes, s->host_bytes,
							s->streams,   s->queued + s->parked + s->in_flight};
			snprintf(l, sizeof(l), "session=\"%llu\"", (unsigned long long)s->id);
			sample(f, names[k], l, v[k]);
		}
	}
}

static void
tenant_label(char *l, size_t len, const char *name)
{
	label(l, len, "tenant", name);
}

static void
fmt_tenants(FILE *f, const struct stats_snap *snap)
{
	char l[160];
	head(f, "tenant_busy_seconds_total", "counter",
	     "Device time the work of a tenant's sessions took (stream occupancy, summed over streams), what its "
	     "weight is kept by.");
	for (uint32_t i = 0; i < snap->nten; i++) {
		tenant_label(l, sizeof(l), snap->ten[i].name);
		fprintf(f, "cuasyncd_tenant_busy_seconds_total{%s} %.9f\n", l, (double)snap->ten[i].busy_ns / 1e9);
	}
	head(f, "tenant_weight", "gauge", "A tenant's weight against other busy tenants (the configuration file's).");
	for (uint32_t i = 0; i < snap->nten; i++) {
		tenant_label(l, sizeof(l), snap->ten[i].name);
		sample(f, "tenant_weight", l, snap->ten[i].weight);
	}
	head(f, "tenant_sessions", "gauge", "A tenant's live sessions.");
	for (uint32_t i = 0; i < snap->nten; i++) {
		tenant_label(l, sizeof(l), snap->ten[i].name);
		sample(f, "tenant_sessions", l, snap->ten[i].sessions);
	}
	head(f, "tenant_device_memory_bytes", "gauge", "Device memory a tenant's sessions hold, on all devices.");
	for (uint32_t i = 0; i < snap->nten; i++) {
		tenant_label(l, sizeof(l), snap->ten[i].name);
		sample(f, "tenant_device_memory_bytes", l, snap->ten[i].dev_bytes);
	}
}

/* Per-tenant request and error counters (tenants with a request since the start). */
static void
fmt_tenant_requests(FILE *f, const struct stats_snap *snap)
{
	char l[200], t[160];
	head(f, "tenant_requests_total", "counter",
	     "Client requests of a tenant's sessions answered, by family of request kinds.");
	for (uint32_t i = 0; i < snap->ntctr; i++)
		for (int fam = SF_NONE + 1; fam < SF_NFAMILIES; fam++) {
			tenant_label(t, sizeof(t), snap->tctr[i].name);
			snprintf(l, sizeof(l), "%s,family=\"%s\"", t, family_names[fam]);
			sample(f, "tenant_requests_total", l, snap->tctr[i].requests[fam]);
		}
	head(f, "tenant_errors_total", "counter", "Of them, those answered with an error, by error name.");
	for (uint32_t i = 0; i < snap->ntctr; i++)
		for (uint32_t st = 1; st < STATS_NSTATUS; st++) {
			if (snap->tctr[i].errors[st] == 0)
				continue;
			tenant_label(t, sizeof(t), snap->tctr[i].name);
			snprintf(l, sizeof(l), "%s,error=\"%s\"", t, cua_strerror_name((int)st));
			sample(f, "tenant_errors_total", l, snap->tctr[i].errors[st]);
		}
}

/* The process_ series, named as Prometheus's client libraries name them (no cuasyncd_ prefix). */
static void
fmt_process(FILE *f, const struct stats_snap *snap)
{
	if (!snap->proc.ok)
		return;
	static const struct {
		const char *name, *type, *help;
	} rows[] = {
		{"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."},
		{"process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."},
		{"process_resident_memory_bytes", "gauge", "Resident memory size in bytes."},
		{"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."},
		{"process_open_fds", "gauge", "Number of open file descriptors."},
		{"process_max_fds", "gauge", "Maximum number of open file descriptors."},
	};
	const double v[] = {snap->proc.cpu_seconds,         snap->proc.start_seconds,    (double)snap->proc.rss_bytes,
			    (double)snap->proc.vsize_bytes, (double)snap->proc.open_fds, (double)snap->proc.max_fds};
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", rows[k].name, rows[k].help, rows[k].name,
			rows[k].type, rows[k].name, v[k]);
}

char *
stats_format(const struct stats_snap *snap, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (f == NULL)
		return NULL;
	head(f, "build_info", "gauge", "Always 1; the version of the daemon in its label.");
	fprintf(f, "cuasyncd_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
	head(f, "uptime_seconds", "gauge", "Seconds since the daemon started.");
	fprintf(f, "cuasyncd_uptime_seconds %.3f\n", (double)snap->uptime_ms / 1000.0);
	head(f, "sessions", "gauge", "Live client sessions (connections that said HELLO), the operator's included.");
	sample(f, "sessions", "", snap->sessions);
	head(f, "sessions_opened_total", "counter", "Connections that got a session since the start.");
	sample(f, "sessions_opened_total", "", snap->sessions_total);
	fmt_requests(f, snap);
	fmt_latency(f, snap);
	fmt_hops(f, snap);
	fmt_work(f, snap);
	fmt_devices(f, snap);
	if (snap->sess != NULL)
		fmt_sessions(f, snap);
	if (snap->ten != NULL)
		fmt_tenants(f, snap);
	if (snap->tctr != NULL)
		fmt_tenant_requests(f, snap);
	head(f, "http_connections_refused_total", "counter",
	     "Connections to this endpoint closed at once: over its bound in number (all, or from one address).");
	sample(f, "http_connections_refused_total", "", snap->http_refused);
	fmt_process(f, snap);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
