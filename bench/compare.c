/*
 * compare.c — cuasync-bench --compare (compare.h): every column of issue 11's table from one run, then issue
 * 19's rows (the shared-memory channel on and off, pinned async copies, a 32000-byte argument). The native
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

/* Issue 19's rows: the channel on and off (own stream, empty kernel), copies, the large argument. */
enum chan { CHAN_ON, CHAN_OFF, NCHANS };
enum copy_row { COPY_NATIVE, COPY_HOSTBUF, COPY_MALLOC, NCOPIES };
static const char *const copy_name[NCOPIES] = {"native: cuMemHostAlloc buffer, cuMemcpy*Async + cuStreamSynchronize",
					       "cuasyncd: cua_host_alloc buffer, batch item + cua_stream_synchronize",
					       "cuasyncd: malloc'd buffer, bytes in 8 MiB batches"};
enum big_row { BIG_NATIVE, BIG_CUAD, NBIGS };

struct compare {
	const struct compare_opts *o;
	char feature_module[4096]; /* o->feature_module, or feature_kernels.fatbin beside --module; "" when neither */
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
	/* issue 19: .ok == 0 with .msg: why the row is missing ("" when not measured) */
	struct tenant_result native_empty;      /* native launch + sync of the empty kernel */
	struct tenant_result chan_lat[NCHANS];  /* own stream, launch + future wait */
	struct tenant_result chan_ping[NCHANS]; /* PING round trip */
	struct tenant_result copy[NCOPIES][2];  /* [row][dtoh]: launches = bytes, t0..t1 */
	struct tenant_result big[NBIGS];        /* pipelined in t0..t1, then p50/p99 */
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

/* Sets CUASYNC_SHM as job asks before this tenant's cua_connect, which reads it (client/calls.c: "0" leaves
 * every request on the socket; anything else or unset attaches the shared-memory channel on ipc://). */
static void
apply_shm(const struct bench_job *job)
{
	if (job->shm != BENCH_SHM_INHERIT)
		setenv("CUASYNC_SHM", job->shm == BENCH_SHM_ON ? "1" : "0", 1);
}

/* A tenant asked for the channel that did not get one measured the socket: say so beside its figures. */
static void
note_shm(const struct bench_job *job, cua_client *c, struct tenant_result *out)
{
	if (job->shm == BENCH_SHM_ON && cua_shm_requests(c) == 0)
		snprintf(out->msg, sizeof(out->msg), "channel not attached: every request went through the socket");
}

/* Connects, loads the module (the fatbin when readable, else the emulated device's image), creates the stream
 * (job->own_stream) and axpy's buffers. 0, or -1 with err. */
static int
cuad_open(const struct bench_job *job, struct cuad_tenant *t, char *err, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->k = job->kernel;
	apply_shm(job);
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
	bench_percentiles(v, REPS, out);
	note_shm(arg, t.c, out);
	cua_disconnect(t.c);
}

/* PING round trips, BENCH_LAT_REPS after 100 for warm-up. */
static void
cuad_ping_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	static double v[BENCH_LAT_REPS];
	cua_client *c;
	char *err = out->msg;
	size_t len = sizeof(out->msg);
	(void)k;
	apply_shm(job);
	int r = cua_connect(job->url, &c);
	for (int i = 0; i < 100 && r == 0; i++)
		r = cua_ping(c);
	if (r != 0) {
		snprintf(err, len, "cua_ping: %s: %s", cua_strerror_name(r), cua_last_error());
		return;
	}
	if (tenant_ready(g) != 0)
		return;
	for (int i = 0; i < BENCH_LAT_REPS; i++) {
		double t0 = bench_now();
		if ((r = cua_ping(c)) != 0) {
			snprintf(err, len, "cua_ping: %s: %s", cua_strerror_name(r), cua_last_error());
			return;
		}
		v[i] = bench_now() - t0;
	}
	bench_percentiles(v, BENCH_LAT_REPS, out);
	note_shm(job, c, out);
	cua_disconnect(c);
}

/* Bytes per batch for a malloc'd buffer: they travel in the request (host to device) or the reply (device to
 * host), which the daemon takes up to --max-message (65M by default) and stages through --staging (256M per
 * device, shared by every session): 8 MiB stays well inside both. */
#define COPY_CHUNK ((size_t)8 << 20)

/* A copy tenant: an own stream, job->copy_bytes of device memory and the host buffer (job->copy_malloc). */
struct cuad_copy {
	const struct bench_job *job;
	cua_client *c;
	cua_stream s;
	cua_deviceptr d;
	unsigned char *h;
	size_t chunk;    /* bytes per batch */
	cua_future **fs; /* a malloc'd buffer's device-to-host batches */
};

/* One copy of job->copy_bytes in job's direction on t's stream, then cua_stream_synchronize. A cua_host_alloc
 * buffer: one batch item that carries no bytes (the GPU reads or writes the buffer in stream order, as CUDA's
 * cuMemcpy*Async from page-locked memory), fire-and-forget. A malloc'd buffer: COPY_CHUNK per batch, host to
 * device fire-and-forget, device to host with a future each (the reply carries the bytes: a fire-and-forget
 * batch would drop them). 0, or -1 with err. */
static int
cuad_copy_once(struct cuad_copy *t, char *err, size_t len)
{
	const struct bench_job *job = t->job;
	int futures = job->copy_malloc && job->copy_dtoh;
	size_t nb = 0;
	for (size_t off = 0; off < job->copy_bytes; off += t->chunk, nb++) {
		size_t n = job->copy_bytes - off < t->chunk ? job->copy_bytes - off : t->chunk;
		cua_batch *b = cua_batch_new(t->c);
		int r = b == NULL        ? CUA_ENOMEM
			: job->copy_dtoh ? cua_batch_add_memcpy_dtoh(b, t->h + off, t->d + off, n, t->s)
					 : cua_batch_add_memcpy_htod(b, t->d + off, t->h + off, n, t->s);
		if (r != 0) {
			cua_batch_free(b);
			snprintf(err, len, "adding a copy to a batch: %s: %s", cua_strerror_name(r), cua_last_error());
			return -1;
		}
		CUA_CK(cua_batch_submit(b, futures ? &t->fs[nb] : NULL));
	}
	for (size_t i = 0; futures && i < nb; i++) {
		int w = cua_future_wait(t->fs[i], -1);
		if (w != 0) {
			snprintf(err, len, "device-to-host batch: %s: %s", cua_strerror_name(w),
				 cua_future_error(t->fs[i]));
			return -1;
		}
		cua_future_free(t->fs[i]);
	}
	CUA_CK(cua_stream_synchronize(t->c, t->s));
	return 0;
}

/* Connects, makes t's stream, device memory (0x5a everywhere) and host buffer, warms up. 0, or -1 with err. */
static int
cuad_copy_open(const struct bench_job *job, struct cuad_copy *t, struct tenant_result *out)
{
	char *err = out->msg;
	size_t len = sizeof(out->msg);
	int ndevs = 0;
	memset(t, 0, sizeof(*t));
	t->job = job;
	t->chunk = job->copy_malloc ? COPY_CHUNK : job->copy_bytes;
	t->fs = calloc(job->copy_bytes / t->chunk + 1, sizeof(*t->fs));
	if (t->fs == NULL) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	apply_shm(job);
	CUA_CK(cua_connect(job->url, &t->c));
	CUA_CK(cua_device_count(t->c, &ndevs));
	CUA_CK(cua_stream_create(t->c, 0, 0, &t->s));
	CUA_CK(cua_mem_alloc(t->c, 0, job->copy_bytes, &t->d));
	CUA_CK(cua_memset(t->c, t->d, 0x5a, 1, job->copy_bytes));
	if (job->copy_malloc)
		t->h = malloc(job->copy_bytes);
	else {
		void *p;
		CUA_CK(cua_host_alloc(t->c, 0, job->copy_bytes, &p));
		t->h = p;
	}
	if (t->h == NULL) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	memset(t->h, job->copy_dtoh ? 0 : 0xa5, job->copy_bytes); /* the pages exist before the timing */
	for (int i = 0; i < BENCH_COPY_WARMUP; i++)
		if (cuad_copy_once(t, err, len) != 0)
			return -1;
	/* batch items use the host buffer only where the daemon shows one device (client/batch.c) */
	if (!job->copy_malloc && ndevs != 1)
		snprintf(err, len, "the daemon shows %d devices: these copies carried their bytes", ndevs);
	return 0;
}

/* The copies' last bytes arrived: a figure for copies that did not happen would be worse than none. */
static int
cuad_copy_check(struct cuad_copy *t, char *err, size_t len)
{
	size_t last = t->job->copy_bytes - 1;
	unsigned char b = 0;
	CUA_CK(cua_synchronize(t->c)); /* the fire-and-forget batches' errors */
	if (t->job->copy_dtoh)
		b = t->h[0] == 0x5a ? t->h[last] : t->h[0];
	else
		CUA_CK(cua_memcpy_dtoh(t->c, &b, t->d + last, 1));
	if (b != (t->job->copy_dtoh ? 0x5a : 0xa5)) {
		snprintf(err, len, "the copied bytes are wrong (0x%02x)", b);
		return -1;
	}
	return 0;
}

/* job->copy_bytes BENCH_COPY_REPS times through cuasyncd: out->launches holds the bytes, so the rate is bytes/s. */
static void
cuad_copy_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct cuad_copy t;
	char note[sizeof(out->msg)];
	(void)k;
	if (cuad_copy_open(job, &t, out) != 0)
		return;
	snprintf(note, sizeof(note), "%s", out->msg);
	if (tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	for (int i = 0; i < BENCH_COPY_REPS; i++)
		if (cuad_copy_once(&t, out->msg, sizeof(out->msg)) != 0)
			return;
	out->t1 = bench_now();
	if (cuad_copy_check(&t, out->msg, sizeof(out->msg)) != 0)
		return;
	out->launches = (double)job->copy_bytes * BENCH_COPY_REPS;
	out->ok = 1;
	snprintf(out->msg, sizeof(out->msg), "%s", note);
	if (!job->copy_malloc)
		cua_host_free(t.c, t.h);
	cua_disconnect(t.c);
}

static const char emu_feature_image[] = "cuasync-emu-module\nbig_param_copy\n";

/* A large-argument tenant: big_param_copy, an own stream, its output buffer. */
struct cuad_big {
	cua_client *c;
	cua_function f;
	cua_stream s;
	cua_deviceptr out;
};

static uint32_t big_arg[BENCH_BIG_PARAM_BYTES / 4];

static int
cuad_big_open(const struct bench_job *job, struct cuad_big *t, char *err, size_t len)
{
	cua_module m;
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < sizeof(big_arg) / 4; i++)
		big_arg[i] = 0xa5a5a5a5u;
	apply_shm(job);
	CUA_CK(cua_connect(job->url, &t->c));
	if (job->feature_module != NULL && access(job->feature_module, R_OK) == 0)
		CUA_CK(cua_module_load_file(t->c, 0, job->feature_module, &m));
	else
		CUA_CK(cua_module_load(t->c, 0, emu_feature_image, sizeof(emu_feature_image) - 1, &m));
	CUA_CK(cua_module_get_function(t->c, m, "big_param_copy", &t->f));
	CUA_CK(cua_stream_create(t->c, 0, 0, &t->s));
	CUA_CK(cua_mem_alloc(t->c, 0, sizeof(big_arg), &t->out));
	return 0;
}

/* A launch of big_param_copy(out, the 32000 bytes) on t's stream, built; NULL with err. */
static cua_launch *
cuad_big_new(struct cuad_big *t, char *err, size_t len)
{
	cua_launch *l = cua_launch_new(t->c, t->f);
	if (l == NULL) {
		snprintf(err, len, "out of memory");
		return NULL;
	}
	int r = cua_launch_set_config(l, (cua_launch_config){{BENCH_BIG_GRID, 1, 1}, {BENCH_BIG_BLOCK, 1, 1}, 0});
	r |= cua_launch_set_stream(l, t->s) | cua_launch_push_device_ptr(l, t->out);
	if (r == 0)
		r = cua_launch_push_arg(l, big_arg, sizeof(big_arg));
	if (r != 0) {
		snprintf(err, len, "building the launch: %s: %s", cua_strerror_name(r), cua_last_error());
		cua_launch_free(l);
		return NULL;
	}
	return l;
}

/*
 * n launches in fire-and-forget batches of BIG_BATCH, then cua_stream_synchronize (what the native
 * cuStreamSynchronize is). Not n cua_launch_submit calls: libcuasync coalesces the launches queued behind those
 * in flight, up to 4096 into one message whatever their argument bytes, and 4096 of these (131 MB) exceed the
 * daemon's --max-message (65M: the connection is dropped, SESSION_LOST) or, past that, its worker ring (16M:
 * TOO_LARGE). BIG_BATCH × 32 KB stays inside both.
 */
#define BIG_BATCH 128

static int
cuad_big_pipelined(struct cuad_big *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n;) {
		cua_batch *b = cua_batch_new(t->c);
		if (b == NULL) {
			snprintf(err, len, "out of memory");
			return -1;
		}
		for (int j = 0; j < BIG_BATCH && i < n; j++, i++) {
			cua_launch *l = cuad_big_new(t, err, len);
			int r = l == NULL ? -1 : cua_batch_add_launch(b, l);
			if (r != 0) {
				if (l != NULL)
					snprintf(err, len, "cua_batch_add_launch: %s: %s", cua_strerror_name(r),
						 cua_last_error());
				cua_batch_free(b);
				return -1;
			}
		}
		CUA_CK(cua_batch_submit(b, NULL));
	}
	CUA_CK(cua_stream_synchronize(t->c, t->s));
	return 0;
}

/* Launch + future wait of one. */
static int
cuad_big_sync(struct cuad_big *t, char *err, size_t len)
{
	cua_future *fu;
	cua_launch *l = cuad_big_new(t, err, len);
	if (l == NULL)
		return -1;
	CUA_CK(cua_launch_submit(l, &fu));
	int w = cua_future_wait(fu, -1);
	if (w != 0)
		snprintf(err, len, "big_param_copy: %s: %s", cua_strerror_name(w), cua_future_error(fu));
	cua_future_free(fu);
	return w == 0 ? 0 : -1;
}

/* The arguments reached the kernel: its output holds them. */
static int
cuad_big_check(struct cuad_big *t, char *err, size_t len)
{
	uint32_t got[2];
	CUA_CK(cua_synchronize(t->c)); /* the fire-and-forget launches' errors */
	CUA_CK(cua_memcpy_dtoh(t->c, &got[0], t->out, 4));
	CUA_CK(cua_memcpy_dtoh(t->c, &got[1], t->out + sizeof(big_arg) - 4, 4));
	if (got[0] != big_arg[0] || got[1] != big_arg[0]) {
		snprintf(err, len, "big_param_copy wrote 0x%08x ... 0x%08x, not its argument", got[0], got[1]);
		return -1;
	}
	return 0;
}

/* BENCH_BIG_PIPELINED launches back to back timed in t0..t1, then BENCH_LAT_REPS launch + wait: p50/p99. */
static void
cuad_big_param_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	static double v[BENCH_LAT_REPS];
	struct cuad_big t;
	char *err = out->msg;
	size_t len = sizeof(out->msg);
	(void)k;
	if (cuad_big_open(arg, &t, err, len) != 0 || cuad_big_pipelined(&t, 100, err, len) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (cuad_big_pipelined(&t, BENCH_BIG_PIPELINED, err, len) != 0)
		return;
	out->t1 = bench_now();
	out->launches = BENCH_BIG_PIPELINED;
	for (int i = 0; i < BENCH_LAT_REPS; i++) {
		double t0 = bench_now();
		if (cuad_big_sync(&t, err, len) != 0)
			return;
		v[i] = bench_now() - t0;
	}
	if (cuad_big_check(&t, err, len) != 0)
		return;
	bench_percentiles(v, BENCH_LAT_REPS, out);
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

/* One tenant of issue 19's rows into *res (on failure: .ok = 0 and .msg says why, also on stderr). */
static void
measure_row(struct compare *c, tenant_fn fn, const struct bench_job *job, const char *what, int cuasyncd,
	    struct tenant_result *res)
{
	char err[256];
	double rate;
	memset(res, 0, sizeof(*res));
	if (gang_run(1, fn, (void *)job, GANG_TIMEOUT_S, &rate, res, err, sizeof(err)) != 0) {
		fprintf(stderr, "cuasync-bench: %s: %s\n", what, err);
		memset(res, 0, sizeof(*res));
		snprintf(res->msg, sizeof(res->msg), "%s", err);
		c->failed |= cuasyncd;
		return;
	}
	fprintf(stderr, "  %s: measured\n", what); /* progress, as the tables' cells */
}

/* The empty kernel (the channel rows launch it whatever --kernel says) and the large-argument kernel. */
static const struct bench_kernel empty_kernel = {"empty_kernel", 0, 0, 1, 32, "empty"};
static const struct bench_kernel big_kernel = {"big_param_copy", 0, 0, BENCH_BIG_GRID, BENCH_BIG_BLOCK, "big"};

static struct bench_job
extra_job(const struct compare *c, const struct bench_kernel *k)
{
	struct bench_job job = {k, c->o->launches, 1, 1, c->o->module, c->o->url, 0};
	job.copy_bytes = c->o->copy_bytes;
	job.feature_module = c->feature_module[0] ? c->feature_module : NULL;
	return job;
}

/* Copies of one row, host to device then device to host. */
static void
measure_copies(struct compare *c, tenant_fn fn, struct bench_job *job, enum copy_row row)
{
	for (int dtoh = 0; dtoh < 2; dtoh++) {
		char what[160];
		job->copy_dtoh = dtoh;
		job->copy_malloc = row == COPY_MALLOC;
		snprintf(what, sizeof(what), "%s, %s", copy_name[row], dtoh ? "device to host" : "host to device");
		measure_row(c, fn, job, what, row != COPY_NATIVE, &c->copy[row][dtoh]);
	}
}

/* Issue 19's native rows: launch + sync of the empty kernel (unless a table has it), copies, the large argument. */
static void
measure_native_extra(struct compare *c)
{
	struct bench_job job = extra_job(c, &empty_kernel);
	int ki;
	for (ki = 0; ki < c->nk && strcmp(c->k[ki].fn, "empty_kernel") != 0; ki++)
		;
	if (ki < c->nk && c->lat[ki][LAT_NATIVE].ok)
		c->native_empty = c->lat[ki][LAT_NATIVE];
	else
		measure_row(c, native_latency_tenant, &job, "native launch + sync, empty", 0, &c->native_empty);
	measure_copies(c, native_copy_tenant, &job, COPY_NATIVE);
	job = extra_job(c, &big_kernel);
	measure_row(c, native_big_param_tenant, &job, "native, 32000-byte argument", 0, &c->big[BIG_NATIVE]);
}

/* Issue 19's cuasyncd rows. */
static void
measure_cuasyncd_extra(struct compare *c)
{
	struct bench_job job = extra_job(c, &empty_kernel);
	for (int ch = 0; ch < NCHANS; ch++) {
		job.shm = ch == CHAN_ON ? BENCH_SHM_ON : BENCH_SHM_OFF;
		measure_row(c, cuad_latency_tenant, &job,
			    ch == CHAN_ON ? "sync latency, channel on" : "sync latency, channel off", 1,
			    &c->chan_lat[ch]);
		measure_row(c, cuad_ping_tenant, &job, ch == CHAN_ON ? "PING, channel on" : "PING, channel off", 1,
			    &c->chan_ping[ch]);
	}
	job.shm = BENCH_SHM_INHERIT;
	measure_copies(c, cuad_copy_tenant, &job, COPY_HOSTBUF);
	measure_copies(c, cuad_copy_tenant, &job, COPY_MALLOC);
	job = extra_job(c, &big_kernel);
	measure_row(c, cuad_big_param_tenant, &job, "cuasyncd, 32000-byte argument", 1, &c->big[BIG_CUAD]);
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
	measure_native_extra(c); /* outside MPS, as the other native rows */
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
	measure_cuasyncd_extra(c);
}

/* The daemon could not be reached: issue 19's cuasyncd rows say so. */
static void
unmeasured_cuasyncd(struct compare *c)
{
	struct tenant_result *rows[] = {&c->chan_lat[CHAN_ON],    &c->chan_lat[CHAN_OFF],    &c->chan_ping[CHAN_ON],
					&c->chan_ping[CHAN_OFF],  &c->copy[COPY_HOSTBUF][0], &c->copy[COPY_HOSTBUF][1],
					&c->copy[COPY_MALLOC][0], &c->copy[COPY_MALLOC][1],  &c->big[BIG_CUAD]};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		snprintf(rows[i]->msg, sizeof(rows[i]->msg), "not measured: %.200s", c->daemon_dev);
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

/* Why a row is missing: its tenant's message, unless that is the native columns' reason, printed above. */
static const char *
why(const struct compare *c, const struct tenant_result *t)
{
	if (c->native_why[0] && (!t->msg[0] || strcmp(t->msg, c->native_why) == 0))
		return "native columns unavailable, see above";
	return t->msg[0] ? t->msg : "not measured";
}

/* "- LABEL   p50 / p99 µs (p50 R× native)", or "- LABEL   n/a (why)"; a successful tenant's note follows. */
static void
print_latency(const struct compare *c, const char *label, const struct tenant_result *t, double native50)
{
	if (!t->ok) {
		printf("- %-52s n/a (%s)\n", label, why(c, t));
		return;
	}
	printf("- %-52s %8.1f / %8.1f µs", label, t->p50 * 1e6, t->p99 * 1e6);
	if (native50 > 0)
		printf(" (p50 %.2f× native)", t->p50 / native50);
	printf(t->msg[0] ? " — %s\n" : "\n", t->msg);
}

static double
row_rate(const struct tenant_result *t)
{
	return t->ok && t->t1 > t->t0 ? t->launches / (t->t1 - t->t0) : 0;
}

static void
print_channel(const struct compare *c)
{
	const char *env = getenv("CUASYNC_SHM");
	double native50 = c->native_empty.ok ? c->native_empty.p50 : 0;
	printf("\n### libcuasync's shared-memory channel on and off — empty kernel, own stream\n\n");
	printf("Launch + completion of one kernel and PING, %d times each after 100, p50 / p99; each row a fresh\n"
	       "client process with CUASYNC_SHM set before cua_connect (the rows above ran with CUASYNC_SHM %s%s).\n\n",
	       BENCH_LAT_REPS, env ? "=" : "", env ? env : "unset");
	print_latency(c, "native launch + cuStreamSynchronize", &c->native_empty, 0);
	print_latency(c, "cuasyncd, own stream, channel on (CUASYNC_SHM=1)", &c->chan_lat[CHAN_ON], native50);
	print_latency(c, "cuasyncd, own stream, channel off (CUASYNC_SHM=0)", &c->chan_lat[CHAN_OFF], native50);
	print_latency(c, "PING round trip, channel on", &c->chan_ping[CHAN_ON], 0);
	print_latency(c, "PING round trip, channel off", &c->chan_ping[CHAN_OFF], 0);
}

/* "12.34 GB/s", with " · 0.91× native" for cuasyncd's rows; "n/a" when missing. */
static void
fmt_copy(const struct compare *c, int row, int dtoh, char *buf, size_t len)
{
	double r = row_rate(&c->copy[row][dtoh]), native = row_rate(&c->copy[COPY_NATIVE][dtoh]);
	if (r <= 0) {
		snprintf(buf, len, "n/a");
		return;
	}
	snprintf(buf, len, "%.2f GB/s", r / 1e9);
	if (row != COPY_NATIVE)
		append_ratio(buf, len, r, native, 1);
}

static void
print_copies(const struct compare *c)
{
	size_t bytes = c->o->copy_bytes;
	printf("\n### Async copies, %zu %s each way, %d times after %d for warm-up, on a stream of its own\n\n",
	       bytes % (1u << 20) == 0 ? bytes >> 20 : bytes, bytes % (1u << 20) == 0 ? "MiB" : "bytes",
	       BENCH_COPY_REPS, BENCH_COPY_WARMUP);
	printf("| | host to device | device to host |\n|---|---|---|\n");
	for (int row = 0; row < NCOPIES; row++) {
		char h2d[64], d2h[64];
		fmt_copy(c, row, 0, h2d, sizeof(h2d));
		fmt_copy(c, row, 1, d2h, sizeof(d2h));
		printf("| %s | %s | %s |\n", copy_name[row], h2d, d2h);
	}
	/* why rows are missing, and notes of those measured (a host buffer that was not used) */
	for (int row = 0; row < NCOPIES; row++) {
		const char *say[2];
		for (int dtoh = 0; dtoh < 2; dtoh++) {
			const struct tenant_result *t = &c->copy[row][dtoh];
			say[dtoh] = !t->ok ? why(c, t) : t->msg[0] ? t->msg : NULL;
		}
		if (say[0] != NULL && say[1] != NULL && strcmp(say[0], say[1]) == 0)
			printf("- %s: %s\n", copy_name[row], say[0]);
		else
			for (int dtoh = 0; dtoh < 2; dtoh++)
				if (say[dtoh] != NULL)
					printf("- %s, %s: %s\n", copy_name[row],
					       dtoh ? "device to host" : "host to device", say[dtoh]);
	}
	printf("GB/s = 10^9 bytes/s; after a cuasyncd figure its ratio to the native one.\n");
}

static void
print_big(const struct compare *c)
{
	static const char *const name[NBIGS] = {"native: cuLaunchKernel, kernelParams",
						"cuasyncd, own stream: cua_launch_push_arg"};
	const struct tenant_result *n = &c->big[BIG_NATIVE];
	double nrate = row_rate(n);
	printf("\n### A 32000-byte by-value argument — big_param_copy(out, struct of 8000 words), grid %u × block "
	       "%u\n\n",
	       BENCH_BIG_GRID, BENCH_BIG_BLOCK);
	printf("Per launch: %d launches back to back on one stream, then one synchronize (native cuStreamSynchronize;\n"
	       "cuasyncd fire-and-forget batches of %d launches, then cua_stream_synchronize: libcuasync would\n"
	       "coalesce up to 4096 queued cua_launch_submit launches, 131 MB of these, into one message, past the\n"
	       "daemon's limits). Sync latency: cua_launch_submit + future wait of one, %d times, p50 / p99.\n\n",
	       BENCH_BIG_PIPELINED, BIG_BATCH, BENCH_LAT_REPS);
	printf("| | µs per launch, pipelined | sync latency p50 / p99 |\n|---|---|---|\n");
	for (int row = 0; row < NBIGS; row++) {
		const struct tenant_result *t = &c->big[row];
		double r = row_rate(t);
		if (!t->ok) {
			printf("| %s | n/a | n/a |\n", name[row]);
			continue;
		}
		printf("| %s | %.2f µs", name[row], 1e6 / r);
		if (row != BIG_NATIVE && nrate > 0)
			printf(" · %.2f× native", nrate / r);
		printf(" | %.1f / %.1f µs", t->p50 * 1e6, t->p99 * 1e6);
		if (row != BIG_NATIVE && n->ok)
			printf(" · %.2f× native", t->p50 / n->p50);
		printf(" |\n");
	}
	for (int row = 0; row < NBIGS; row++)
		if (!c->big[row].ok)
			printf("- %s: %s\n", name[row], why(c, &c->big[row]));
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

/* --feature-module, else feature_kernels.fatbin in --module's directory (the build's tests/kernels/, which
 * bench/run-gpu.sh names with --module), else "" (cuasyncd then loads the emulated device's image). */
static void
find_feature_module(struct compare *c)
{
	const char *m = c->o->module, *slash = m != NULL ? strrchr(m, '/') : NULL;
	if (c->o->feature_module != NULL)
		snprintf(c->feature_module, sizeof(c->feature_module), "%s", c->o->feature_module);
	else if (m != NULL)
		snprintf(c->feature_module, sizeof(c->feature_module), "%.*sfeature_kernels.fatbin",
			 slash != NULL ? (int)(slash - m + 1) : 0, m);
}

int
compare_main(const struct compare_opts *o)
{
	struct compare *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return 1;
	c->o = o;
	find_feature_module(c);
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
	else
		unmeasured_cuasyncd(c);
	print_header(c);
	for (int ki = 0; ki < c->nk; ki++)
		print_table(c, ki);
	print_channel(c);
	print_copies(c);
	print_big(c);
	int r = c->failed;
	free(c);
	return r;
}
