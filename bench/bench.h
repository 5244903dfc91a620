/*
 * bench.h — what cuasync-bench's side-by-side comparison (--compare) shares between its parts: the kernel a
 * run launches, and gangs of tenant processes started in step whose timed spans the parent collects.
 *
 * The comparing process itself never initializes CUDA nor NNG: every tenant (native or a cuasyncd client) runs
 * in a process forked for it, so forking stays safe however many measurements follow each other.
 */
#ifndef CUABENCH_BENCH_H
#define CUABENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* One kernel to launch: empty_kernel, spin(cycles) or axpy(a, x, y, n), with the same grid everywhere. */
struct bench_kernel {
	const char *fn; /* "empty_kernel", "spin" or "axpy" */
	int64_t cycles; /* spin */
	uint64_t n;     /* axpy: elements of x and y (floats) */
	unsigned grid, block;
	char label[48]; /* "empty", "spin 20000 cycles", "axpy 1048576" */
};

/* Parses "empty", "spin:CYCLES" or "axpy:N" (one item of --kernel). Returns 0, or -1 when malformed. */
int bench_kernel_parse(const char *spec, size_t len, struct bench_kernel *k);

/* CLOCK_MONOTONIC in seconds: one clock for all processes of the machine, so spans of tenants compare. */
double bench_now(void);

/* What one tenant reports to the parent: its timed span and launches, or latency percentiles, or why it
 * failed. Fixed size under PIPE_BUF, so each tenant's write is atomic. */
struct tenant_result {
	int ok;
	double t0, t1;   /* first launch submitted .. last completion seen */
	double launches; /* completed in [t0, t1] */
	double p50, p99; /* latency measurements only, seconds */
	char msg[256];   /* ok == 0: why; else optional text for the parent (a probe's device name) */
};

/* Sorts the n latencies in v (seconds) and puts their p50 and p99 in out, which is ok from then on. */
void bench_percentiles(double *v, size_t n, struct tenant_result *out);

/* What every tenant of one measurement is given. */
struct bench_job {
	const struct bench_kernel *kernel;
	int launches;       /* per tenant, timed; each tenant warms up first with a tenth of that (at most 1000) */
	int threads;        /* threads in one process (native_threads_tenant) */
	int own_stream;     /* cuasyncd tenants: 1 = a stream of their own, 0 = the daemon's pool */
	const char *module; /* the fatbin (native: required; cuasyncd: the emulated image when absent) */
	const char *url;    /* cuasyncd */
	int graph_nodes;    /* --graph-compare: kernels per round (one graph, or that many launches) */
	/* appended, so that the positional initializers above leave them 0 (the defaults) */
	int shm;                    /* cuasyncd tenants: CUASYNC_SHM at cua_connect (enum bench_shm) */
	size_t copy_bytes;          /* copy tenants: bytes of one copy */
	int copy_dtoh;              /* copy tenants: 1 = device to host, 0 = host to device */
	int copy_malloc;            /* cuasyncd copy tenants: 1 = a malloc'd buffer, 0 = cua_host_alloc */
	const char *feature_module; /* large-argument tenants (cuasyncd: the emulated image when absent) */
};

/* What a cuasyncd tenant sets CUASYNC_SHM to before cua_connect: the rows that compare the shared-memory
 * channel on and off choose it; every other row keeps the bench's environment. */
enum bench_shm { BENCH_SHM_INHERIT, BENCH_SHM_ON, BENCH_SHM_OFF };

/* Copies timed per measurement, after BENCH_COPY_WARMUP untimed ones. */
#define BENCH_COPY_REPS 20
#define BENCH_COPY_WARMUP 2

/* The large-argument row: big_param_copy(uint32_t *out, struct { uint32_t w[8000]; } s), 32000 bytes by value
 * (tests/kernels/feature_kernels.cu; worker/emu_kernels.c on the emulated device), on a grid of 8 × 256. */
#define BENCH_BIG_PARAM_BYTES 32000
#define BENCH_BIG_GRID 8
#define BENCH_BIG_BLOCK 256
#define BENCH_BIG_PIPELINED 5000 /* launches back to back, then one synchronize */
#define BENCH_LAT_REPS 2000      /* every sync-latency row: 2000 times after 100 for warm-up */

/* Warm-up launches before a timed run of n. */
static inline int
bench_warmup(int n)
{
	return n >= 10000 ? 1000 : n / 10 + 1;
}

/* Passed to a tenant: it prepares (context or connection, module, warm-up), then calls tenant_ready, which
 * returns when the parent says go (0) or the parent is gone (-1). */
struct tenant_gate {
	int ready_fd, go_fd;
	int signalled;
};
int tenant_ready(struct tenant_gate *g);

/* Body of tenant k (0..P-1) in its own process: fills *out (out->ok = 1 on success, else out->msg). */
typedef void (*tenant_fn)(void *arg, int k, struct tenant_gate *g, struct tenant_result *out);

/*
 * Forks P processes running fn(arg, k, ...), waits until all are ready, says go, and collects their results.
 * Sets *rate to the launches of all tenants over (latest t1 - earliest t0), and copies tenant 0's result to
 * *first when first != NULL (latency). Returns 0, or -1 with the first failure's message in err (tenants that
 * hang past timeout_s are killed). stdout is flushed before forking.
 */
int gang_run(int P, tenant_fn fn, void *arg, double timeout_s, double *rate, struct tenant_result *first, char *err,
	     size_t errlen);

#endif
