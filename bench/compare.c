/*
 * compare.c — cuasync-bench --compare (compare.h): every column of issue 11's table from one run. The native
 * columns come from native.c, MPS from mps.c; the cuasyncd tenants live here. Every measurement is a gang of
 * forked tenants (gang.c), so this process never initializes CUDA or NNG itself.
 */
#include "compare.h"

#include "bench.h"
#include "cuasync.h"
#include "mps.h"
#include "native.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_KERNELS 8
#define MAX_TENANT_COUNTS 16
#define GANG_TIMEOUT_S 900.0

enum col { COL_THREADS, COL_PROCS, COL_MPS, COL_OWN, COL_POOL, NCOLS };

static const char *const col_name[NCOLS] = {"one process, P threads", "P processes", "P processes under MPS",
					    "cuasyncd, own stream", "cuasyncd, pool"};

/* Latencies of one kernel: native launch + cuStreamSynchronize, cuasyncd on its pool and on an own stream. */
enum lat { LAT_NATIVE, LAT_POOL, LAT_OWN, NLATS };
static const char *const lat_name[NLATS] = {"native launch + cuStreamSynchronize",
					    "cuasyncd, pool: submit + future wait",
					    "cuasyncd, own stream: submit + future wait"};

struct compare {
	const struct compare_opts *o;
	struct bench_kernel k[MAX_KERNELS];
	int nk;
	int P[MAX_TENANT_COUNTS];
	int np;
	double rate[MAX_KERNELS][MAX_TENANT_COUNTS][NCOLS]; /* aggregate kernels/s; 0: not measured */
	struct tenant_result lat[MAX_KERNELS][NLATS];       /* .ok == 0: not measured */
	char native_why[256];                               /* why the native columns are missing, "" when present */
	char mps_why[256];                                  /* why the MPS column is missing */
	char gpu[256], daemon_dev[256];
	int failed; /* a cuasyncd measurement failed */
};

/* ------------------------------------------------------------------ cuasyncd tenants */

static const char emu_image[] = "cuasync-emu-module\nempty_kernel\nfill_u32\nspin\naxpy\n";

struct cuad_tenant {
	cua_client *c;
	cua_function f;
	cua_stream s; /* {0}: the daemon's pool */
	cua_deviceptr x, y;
	const struct bench_kernel *k;
};

#define CUA_CK(call)                                                                                                   \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_) {                                                                                             \
			snprintf(err, len, "%s: %s: %s", #call, cua_strerror_name(rc_), cua_last_error());             \
			return -1;                                                                                     \
		}                                                                                                      \
	} while (0)

/* Connects, loads the module (the fatbin when readable, else the emulated device's image), creates the stream
 * (job->own_stream) and axpy's buffers. 0, or -1 with err. */
static int
cuad_open(const struct bench_job *job, struct cuad_tenant *t, char *err, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->k = job->kernel;
	CUA_CK(cua_connect(job->url, &t->c));
	cua_module m;
	if (job->module != NULL && access(job->module, R_OK) == 0)
		CUA_CK(cua_module_load_file(t->c, 0, job->module, &m));
	else
		CUA_CK(cua_module_load(t->c, 0, emu_image, sizeof(emu_image) - 1, &m));
	CUA_CK(cua_module_get_function(t->c, m, t->k->fn, &t->f));
	if (job->own_stream)
		CUA_CK(cua_stream_create(t->c, 0, 0, &t->s));
	if (t->k->n > 0) {
		CUA_CK(cua_mem_alloc(t->c, 0, t->k->n * sizeof(float), &t->x));
		CUA_CK(cua_mem_alloc(t->c, 0, t->k->n * sizeof(float), &t->y));
		CUA_CK(cua_memset(t->c, t->x, 0, 4, t->k->n));
		CUA_CK(cua_memset(t->c, t->y, 0, 4, t->k->n));
	}
	return 0;
}

/* A launch of t's kernel on t's stream, with the same grid and arguments as the native one; NULL on failure. */
static cua_launch *
cuad_launch(struct cuad_tenant *t)
{
	cua_launch *l = cua_launch_new(t->c, t->f);
	if (l == NULL)
		return NULL;
	int r = cua_launch_set_config(l, (cua_launch_config){{t->k->grid, 1, 1}, {t->k->block, 1, 1}, 0});
	if (t->s.id != 0)
		r |= cua_launch_set_stream(l, t->s);
	if (strcmp(t->k->fn, "spin") == 0)
		r |= cua_launch_push_i64(l, t->k->cycles);
	else if (strcmp(t->k->fn, "axpy") == 0)
		r |= cua_launch_push_f32(l, 2.0f) | cua_launch_push_device_ptr(l, t->x) |
		     cua_launch_push_device_ptr(l, t->y) | cua_launch_push_u64(l, t->k->n);
	if (r != 0) {
		cua_launch_free(l);
		return NULL;
	}
	return l;
}

/* n launches, each with a future, then waits for every future (as the default bench's "futures" does). */
static int
cuad_launches(struct cuad_tenant *t, int n, char *err, size_t len)
{
	cua_future **fs = calloc((size_t)n, sizeof(*fs));
	int r = fs == NULL ? CUA_ENOMEM : 0, i;
	for (i = 0; i < n && r == 0; i++) {
		cua_launch *l = cuad_launch(t);
		r = l == NULL ? CUA_EBAD_ARGUMENT : cua_launch_submit(l, &fs[i]);
	}
	if (r != 0)
		snprintf(err, len, "launch %d: %s: %s", i, cua_strerror_name(r), cua_last_error());
	for (int j = 0; j < n && fs != NULL && fs[j] != NULL; j++) {
		int w = cua_future_wait(fs[j], -1);
		if (w != 0 && r == 0) {
			r = w;
			snprintf(err, len, "launch %d: %s: %s", j, cua_strerror_name(w), cua_future_error(fs[j]));
		}
		cua_future_free(fs[j]);
	}
	free(fs);
	return r == 0 ? 0 : -1;
}

/* A cuasyncd client process: P of them make a column (job->own_stream picks which). */
static void
cuad_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct cuad_tenant t;
	(void)k;
	if (cuad_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    cuad_launches(&t, bench_warmup(job->launches), out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (cuad_launches(&t, job->launches, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = job->launches;
	out->ok = 1;
	cua_disconnect(t.c);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Launch + completion of one kernel through cuasyncd, 2000 times after 100 for warm-up. */
static void
cuad_latency_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	enum { REPS = 2000 };
	static double v[REPS];
	struct cuad_tenant t;
	(void)k;
	if (cuad_open(arg, &t, out->msg, sizeof(out->msg)) != 0 ||
	    cuad_launches(&t, 100, out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	for (int i = 0; i < REPS; i++) {
		double t0 = bench_now();
		if (cuad_launches(&t, 1, out->msg, sizeof(out->msg)) != 0)
			return;
		v[i] = bench_now() - t0;
	}
	qsort(v, REPS, sizeof(*v), cmp_double);
	out->p50 = v[REPS / 2];
	out->p99 = v[REPS * 99 / 100];
	out->ok = 1;
	cua_disconnect(t.c);
}

/* The daemon's device 0, described in out->msg. */
static void
cuad_probe_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	cua_client *c = NULL;
	cua_device_info info;
	(void)k;
	(void)g;
	int r = cua_connect(job->url, &c);
	if (r == 0)
		r = cua_device_get_info(c, 0, &info);
	if (r == 0)
		snprintf(out->msg, sizeof(out->msg), "%.160s (sm_%d%d, %.32s backend)", info.name, info.sm_major,
			 info.sm_minor, info.backend);
	else
		snprintf(out->msg, sizeof(out->msg), "cannot reach cuasyncd at %s: %s: %s",
			 job->url ? job->url : "$CUASYNC_URL", cua_strerror_name(r), cua_last_error());
	out->ok = r == 0;
	if (c != NULL)
		cua_disconnect(c);
}

/* ------------------------------------------------------------------ measuring */

/* The tenant function and gang size of a column with P tenants. */
static tenant_fn
col_tenant(enum col col, int P, int *gang)
{
	*gang = col == COL_THREADS ? 1 : P;
	switch (col) {
	case COL_THREADS: return native_threads_tenant;
	case COL_PROCS:
	case COL_MPS: return native_process_tenant;
	default: return cuad_tenant;
	}
}

static struct bench_job
job_of(const struct compare *c, int ki, int P, int own_stream)
{
	return (struct bench_job){&c->k[ki], c->o->launches, P, own_stream, c->o->module, c->o->url};
}

/* Measures one cell; a failure is reported on stderr and leaves the cell empty. */
static void
measure(struct compare *c, int ki, int pi, enum col col)
{
	int gang;
	tenant_fn fn = col_tenant(col, c->P[pi], &gang);
	struct bench_job job = job_of(c, ki, c->P[pi], col == COL_OWN);
	char err[256];
	double rate = 0;
	if (gang_run(gang, fn, &job, GANG_TIMEOUT_S, &rate, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "cuasync-bench: %s, P=%d, %s: %s\n", c->k[ki].label, c->P[pi], col_name[col], err);
		c->failed |= col >= COL_OWN;
		return;
	}
	c->rate[ki][pi][col] = rate;
	fprintf(stderr, "  %-20s P=%-3d %-24s %10.0f kernels/s\n", c->k[ki].label, c->P[pi], col_name[col], rate);
}

static void
measure_latency(struct compare *c, int ki, enum lat which)
{
	struct bench_job job = job_of(c, ki, 1, which == LAT_OWN);
	tenant_fn fn = which == LAT_NATIVE ? native_latency_tenant : cuad_latency_tenant;
	char err[256];
	double rate;
	if (gang_run(1, fn, &job, GANG_TIMEOUT_S, &rate, &c->lat[ki][which], err, sizeof(err)) != 0) {
		fprintf(stderr, "cuasync-bench: %s, %s: %s\n", c->k[ki].label, lat_name[which], err);
		c->lat[ki][which].ok = 0;
		c->failed |= which != LAT_NATIVE;
	}
}

/* Runs a probe tenant; its text goes to buf. Returns 0, or -1 with the reason in buf. */
static int
probe(const struct compare *c, tenant_fn fn, char *buf, size_t len)
{
	struct bench_job job = job_of(c, 0, 1, 0);
	struct tenant_result r = {0};
	double rate;
	char err[256];
	if (gang_run(1, fn, &job, 120, &rate, &r, err, sizeof(err)) != 0) {
		snprintf(buf, len, "%s", err);
		return -1;
	}
	snprintf(buf, len, "%s", r.msg);
	return 0;
}

/* Native threads and processes, then everything under a private MPS daemon (stopped before returning). */
static void
measure_native(struct compare *c)
{
	for (int ki = 0; ki < c->nk; ki++) {
		measure_latency(c, ki, LAT_NATIVE);
		for (int pi = 0; pi < c->np; pi++) {
			measure(c, ki, pi, COL_THREADS);
			measure(c, ki, pi, COL_PROCS);
		}
	}
	if (!mps_available()) {
		snprintf(c->mps_why, sizeof(c->mps_why), "nvidia-cuda-mps-control is not on PATH");
		return;
	}
	if (mps_start(c->mps_why, sizeof(c->mps_why)) != 0)
		return;
	for (int ki = 0; ki < c->nk; ki++)
		for (int pi = 0; pi < c->np; pi++)
			measure(c, ki, pi, COL_MPS);
	mps_stop();
}

static void
measure_cuasyncd(struct compare *c)
{
	for (int ki = 0; ki < c->nk; ki++) {
		measure_latency(c, ki, LAT_POOL);
		measure_latency(c, ki, LAT_OWN);
		for (int pi = 0; pi < c->np; pi++) {
			measure(c, ki, pi, COL_OWN);
			measure(c, ki, pi, COL_POOL);
		}
	}
}

/* ------------------------------------------------------------------ printing */

/* "273 k", or "n/a" for a figure not measured. */
static const char *
fmt_rate(double r, char *buf, size_t len)
{
	if (r <= 0)
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, r >= 99500 ? "%.0f k" : "%.1f k", r / 1000);
	return buf;
}

/* Appends " / 0.31×" (the ratio of r to the native figure d), or " / –" when either is missing. */
static void
append_ratio(char *buf, size_t len, double r, double d, int first)
{
	size_t used = strlen(buf);
	const char *sep = first ? " · " : " / ";
	if (r > 0 && d > 0)
		snprintf(buf + used, len - used, "%s%.2f×", sep, r / d);
	else
		snprintf(buf + used, len - used, "%s–", sep);
}

static void
print_table(const struct compare *c, int ki)
{
	const struct bench_kernel *k = &c->k[ki];
	printf("\n### %s — grid %u × block %u, %d launches per tenant\n\n", k->label, k->grid, k->block,
	       c->o->launches);
	printf("| P tenants |");
	for (int col = 0; col < NCOLS; col++)
		printf(" %s |", col_name[col]);
	printf("\n|---|---|---|---|---|---|\n");
	for (int pi = 0; pi < c->np; pi++) {
		const double *r = c->rate[ki][pi];
		printf("| %d |", c->P[pi]);
		for (int col = 0; col < NCOLS; col++) {
			char cell[128];
			fmt_rate(r[col], cell, sizeof(cell));
			/* ratios to each native column left of this one (threads, processes, MPS) */
			for (int d = 0; d < col && d <= COL_MPS && !c->native_why[0]; d++)
				if (d != COL_MPS || !c->mps_why[0])
					append_ratio(cell, sizeof(cell), r[col], r[d], d == 0);
			printf(" %s |", cell);
		}
		printf("\n");
	}
	printf("\nSync latency, launch + completion of one kernel (2000 times), p50 / p99:\n");
	double native50 = c->lat[ki][LAT_NATIVE].ok ? c->lat[ki][LAT_NATIVE].p50 : 0;
	for (int l = 0; l < NLATS; l++) {
		const struct tenant_result *t = &c->lat[ki][l];
		if (!t->ok)
			printf("- %-44s n/a\n", lat_name[l]);
		else if (l != LAT_NATIVE && native50 > 0)
			printf("- %-44s %8.1f / %8.1f µs (p50 %.2f× native)\n", lat_name[l], t->p50 * 1e6, t->p99 * 1e6,
			       t->p50 / native50);
		else
			printf("- %-44s %8.1f / %8.1f µs\n", lat_name[l], t->p50 * 1e6, t->p99 * 1e6);
	}
}

static void
print_header(const struct compare *c)
{
	char date[64], host[128] = "?";
	time_t now = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	gethostname(host, sizeof(host) - 1);
	printf("## cuasync-bench --compare, %s\n\n", date);
	printf("Command: `");
	for (int i = 0; i < c->o->argc; i++)
		printf("%s%s", i ? " " : "", c->o->argv[i]);
	printf("`\n\nMachine: %s, %ld CPU cores; GPU (cuDeviceGetName): %s\n", host, sysconf(_SC_NPROCESSORS_ONLN),
	       c->native_why[0] ? "unknown" : c->gpu);
	printf("cuasyncd device 0: %s\n", c->daemon_dev);
	if (c->native_why[0])
		printf("Native columns unavailable: %s\n", c->native_why);
	if (c->mps_why[0])
		printf("MPS column unavailable: %s\n", c->mps_why);
	printf("\nAggregate kernels/s of P tenants, each launching %d kernels back to back and waiting for all of "
	       "them\n"
	       "(native: cuStreamSynchronize; cuasyncd: a future per launch, all waited for), timed from the first\n"
	       "tenant's first launch to the last tenant's last completion. After a figure: its ratio to one process\n"
	       "with P threads / to P processes / to P processes under MPS.\n",
	       c->o->launches);
}

/* ------------------------------------------------------------------ options */

static int
parse_lists(struct compare *c)
{
	for (const char *p = c->o->kernels; *p != '\0' && c->nk < MAX_KERNELS;) {
		size_t n = strcspn(p, ",");
		if (bench_kernel_parse(p, n, &c->k[c->nk++]) != 0) {
			fprintf(stderr, "cuasync-bench: --kernel: bad item '%.*s' (empty, spin:CYCLES or axpy:N)\n",
				(int)n, p);
			return -1;
		}
		p += n + (p[n] == ',');
	}
	for (const char *p = c->o->tenants; *p != '\0' && c->np < MAX_TENANT_COUNTS;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > 256 || (*end != ',' && *end != '\0')) {
			fprintf(stderr, "cuasync-bench: --tenants: expected counts 1..256 separated by commas\n");
			return -1;
		}
		c->P[c->np++] = (int)v;
		p = *end == ',' ? end + 1 : end;
	}
	return c->nk > 0 && c->np > 0 && c->o->launches > 0 ? 0 : -1;
}

int
compare_main(const struct compare_opts *o)
{
	struct compare *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return 1;
	c->o = o;
	if (parse_lists(c) != 0) {
		free(c);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* a tenant that dies must not take the bench with it */
	if (probe(c, native_probe_tenant, c->gpu, sizeof(c->gpu)) != 0)
		snprintf(c->native_why, sizeof(c->native_why), "%s", c->gpu);
	if (probe(c, cuad_probe_tenant, c->daemon_dev, sizeof(c->daemon_dev)) != 0)
		c->failed = 1;
	if (o->daemon_only) {
		snprintf(c->native_why, sizeof(c->native_why), "not measured (--daemon-only)");
		snprintf(c->mps_why, sizeof(c->mps_why), "not measured (--daemon-only)");
	} else if (c->native_why[0])
		snprintf(c->mps_why, sizeof(c->mps_why), "no native CUDA");
	else
		measure_native(c);
	if (!c->failed)
		measure_cuasyncd(c);
	print_header(c);
	for (int ki = 0; ki < c->nk; ki++)
		print_table(c, ki);
	int r = c->failed;
	free(c);
	return r;
}
