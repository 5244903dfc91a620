/*
 * cuasync-bench — how fast cuasyncd is, measured the way clients use it. Speed targets live here, never in
 * the tests. Start a daemon, point CUASYNC_URL at it, then:
 *
 *   cuasync-bench [--module FILE] [--launches N] [--clients K] [--bytes B] [--alloc-bytes B]
 *                 [--alloc-cycles N] [--alloc-only | --latency-only]
 *   cuasync-bench --compare [--kernel empty|spin:CYCLES|axpy:N[,...]] [--tenants 1,4,8] [--launches N]
 *                 [--module FILE] [--feature-module FILE] [--copy-bytes B]
 *   cuasync-bench --graph-compare [--graph N] [--rounds R] [--module FILE]
 *
 * Prints one line per measurement: round-trip latency (PING), launch+complete latency of one kernel,
 * launch throughput from one client with futures and fire-and-forget, aggregate throughput of K client
 * processes, host<->device copy bandwidth through the daemon, and MEM_ALLOC + MEM_FREE cycles of one size
 * (what the daemon's --scrub costs: run it against a daemon with --scrub on, then off; --alloc-only skips
 * the rest; --latency-only stops after the two latencies, e.g. to read the daemon's per-hop metrics of lone
 * launches around it).
 *
 * --compare measures instead the same kernel, launch count and number of tenants natively (threads of one
 * process, separate processes, separate processes under a private MPS daemon) and through cuasyncd, side by
 * side (compare.c); --module must then name the fatbin for the native columns. After the tables, from the same
 * run: sync latency and PING with libcuasync's shared-memory channel on and off (CUASYNC_SHM=1 / 0), pinned
 * async copies of --copy-bytes each way (default 64 MiB) natively and through cuasyncd (a cua_host_alloc buffer,
 * and a malloc'd one), and launches of a kernel taking a 32000-byte argument, from --feature-module (default:
 * feature_kernels.fatbin beside --module).
 *
 * --graph-compare launches N empty kernels per round (default 100) R times (default 1000): as N launches and as
 * one CUDA graph of N nodes (cua_graph_*), natively and through cuasyncd, printing kernels/s and the ratios
 * (graphcmp.c); --module names the fatbin for the native rows.
 */
#include "compare.h"
#include "cuasync.h"
#include "graphcmp.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char emu_image[] = "cuasync-emu-module\nempty_kernel\nfill_u32\n";
static const char *module_path;
static const char *url;

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define DIE(call)                                                                                                      \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_) {                                                                                             \
			fprintf(stderr, "cuasync-bench: %s: %s: %s\n", #call, cua_strerror_name(rc_),                  \
				cua_last_error());                                                                     \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

static cua_function
setup(cua_client *c, const char *kernel)
{
	cua_module m;
	if (module_path && access(module_path, R_OK) == 0)
		DIE(cua_module_load_file(c, 0, module_path, &m));
	else
		DIE(cua_module_load(c, 0, emu_image, sizeof(emu_image) - 1, &m));
	cua_function f;
	DIE(cua_module_get_function(c, m, kernel, &f));
	return f;
}

static cua_launch *
empty(cua_client *c, cua_function f)
{
	cua_launch *l = cua_launch_new(c, f);
	cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {32, 1, 1}, 0});
	return l;
}

static void
percentiles(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("%-44s p50 %8.1f us   p99 %8.1f us   (n=%d)\n", what, v[n / 2] * 1e6, v[n * 99 / 100] * 1e6, n);
}

/* Launches n empty kernels as fast as one client can; returns launches per second. */
static double
throughput(cua_client *c, cua_function f, int n, int with_futures)
{
	cua_future **fs = with_futures ? malloc((size_t)n * sizeof(*fs)) : NULL;
	double t0 = now();
	for (int i = 0; i < n; i++)
		DIE(cua_launch_submit(empty(c, f), with_futures ? &fs[i] : NULL));
	if (with_futures)
		for (int i = 0; i < n; i++) {
			DIE(cua_future_wait(fs[i], -1));
			cua_future_free(fs[i]);
		}
	else
		DIE(cua_synchronize(c));
	double dt = now() - t0;
	free(fs);
	return n / dt;
}

struct bench_opts {
	int launches, clients;
	size_t bytes;
	size_t alloc_bytes; /* MEM_ALLOC + MEM_FREE cycles of this size */
	int alloc_cycles;
	int alloc_only;                         /* only those cycles */
	int latency_only;                       /* --latency-only: PING and sync launch latency, nothing else */
	int compare;                            /* --compare: the side-by-side run (compare.h) instead */
	int daemon_only;                        /* --daemon-only: --compare without the native and MPS columns */
	int graph_compare, graph_nodes, rounds; /* --graph-compare [--graph N] [--rounds R] (graphcmp.h) */
	const char *kernels, *tenants;
	size_t copy_bytes;          /* --copy-bytes: --compare's async copy rows */
	const char *feature_module; /* --feature-module: --compare's large-argument row */
};

/* Fills o from the command line (module_path and url go to the globals). Returns 0, or 2 after printing the
 * usage for an unknown option. */
static int
parse_options(int argc, char **argv, struct bench_opts *o)
{
	static const struct option opts[] = {{"module", 1, NULL, 'm'},
					     {"launches", 1, NULL, 'n'},
					     {"clients", 1, NULL, 'k'},
					     {"bytes", 1, NULL, 'b'},
					     {"url", 1, NULL, 'u'},
					     {"alloc-bytes", 1, NULL, 'a'},
					     {"alloc-cycles", 1, NULL, 'c'},
					     {"alloc-only", 0, NULL, 'o'},
					     {"latency-only", 0, NULL, 'L'},
					     {"compare", 0, NULL, 'C'},
					     {"kernel", 1, NULL, 'K'},
					     {"tenants", 1, NULL, 'T'},
					     {"daemon-only", 0, NULL, 'D'},
					     {"graph-compare", 0, NULL, 'G'},
					     {"graph", 1, NULL, 'N'},
					     {"rounds", 1, NULL, 'R'},
					     {"copy-bytes", 1, NULL, 'Y'},
					     {"feature-module", 1, NULL, 'F'},
					     {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'm': module_path = optarg; break;
		case 'n': o->launches = atoi(optarg); break;
		case 'k': o->clients = atoi(optarg); break;
		case 'b': o->bytes = strtoull(optarg, NULL, 10); break;
		case 'u': url = optarg; break;
		case 'a': o->alloc_bytes = strtoull(optarg, NULL, 10); break;
		case 'c': o->alloc_cycles = atoi(optarg); break;
		case 'o': o->alloc_only = 1; break;
		case 'L': o->latency_only = 1; break;
		case 'C': o->compare = 1; break;
		case 'K': o->kernels = optarg; break;
		case 'T': o->tenants = optarg; break;
		case 'D': o->daemon_only = 1; break;
		case 'G': o->graph_compare = 1; break;
		case 'N': o->graph_nodes = atoi(optarg); break;
		case 'R': o->rounds = atoi(optarg); break;
		case 'Y': o->copy_bytes = strtoull(optarg, NULL, 10); break;
		case 'F': o->feature_module = optarg; break;
		default:
			fprintf(stderr,
				"usage: cuasync-bench [--url URL] [--module FILE] [--launches N] [--clients K] "
				"[--bytes B] [--alloc-bytes B] [--alloc-cycles N] [--alloc-only | --latency-only]\n"
				"       cuasync-bench --compare [--url URL] [--module FATBIN] [--launches N] "
				"[--kernel empty|spin:CYCLES|axpy:N[,...]] [--tenants 1,4,8] [--daemon-only]\n"
				"                 [--copy-bytes B] [--feature-module FATBIN]\n"
				"         then the shared-memory channel on and off, async copies of B bytes each way "
				"(default 67108864), and a 32000-byte argument (feature_kernels.fatbin, by default "
				"beside "
				"--module)\n"
				"       cuasync-bench --graph-compare [--url URL] [--module FATBIN] [--graph N] "
				"[--rounds R]\n"
				"         N empty kernels per round (default 100) as N launches and as one CUDA graph, "
				"natively and through cuasyncd, R rounds (default 1000)\n");
			return 2;
		}
	}
	if (o->copy_bytes == 0) {
		fprintf(stderr, "cuasync-bench: --copy-bytes must be positive\n");
		return 2;
	}
	if (o->alloc_bytes == 0 || o->alloc_cycles <= 0) {
		fprintf(stderr, "cuasync-bench: --alloc-bytes and --alloc-cycles must be positive\n");
		return 2;
	}
	return 0;
}

/* The client processes and the pipes that start them in step: the parent writes one byte per client to start
 * (connect and warm up), reads one per client from ready, then writes one per client to go. */
struct client_procs {
	int start[2], ready[2], go[2];
	pid_t *pids;
};

/* Body of one forked client process; never returns. */
static _Noreturn void
client_process(const struct client_procs *p, int launches)
{
	char x;
	if (read(p->start[0], &x, 1) != 1)
		_exit(1);
	cua_client *cc;
	DIE(cua_connect(url, &cc));
	cua_function ff = setup(cc, "empty_kernel");
	throughput(cc, ff, 1000, 1); /* warm-up */
	if (write(p->ready[1], "r", 1) != 1 || read(p->go[0], &x, 1) != 1)
		_exit(1);
	throughput(cc, ff, launches, 1);
	cua_disconnect(cc);
	_exit(0);
}

/* Forks the client processes; must run before this process touches NNG. Returns 0, or 1 when a pipe fails. */
static int
fork_clients(struct client_procs *p, const struct bench_opts *o)
{
	if (pipe(p->start) || pipe(p->ready) || pipe(p->go))
		return 1;
	fflush(stdout);
	p->pids = calloc((size_t)o->clients, sizeof(*p->pids));
	for (int k = 0; k < o->clients; k++) {
		if ((p->pids[k] = fork()) != 0)
			continue;
		client_process(p, o->launches);
	}
	return 0;
}

/* Latency of a PING and of one empty kernel launched and waited for. */
static void
bench_latency(cua_client *c, cua_function f)
{
	enum { REPS = 2000 };
	static double v[REPS];
	for (int i = 0; i < REPS; i++) {
		double t0 = now();
		DIE(cua_ping(c));
		v[i] = now() - t0;
	}
	percentiles("PING round trip", v, REPS);
	for (int i = 0; i < REPS; i++) {
		double t0 = now();
		cua_future *fu;
		DIE(cua_launch_submit(empty(c, f), &fu));
		DIE(cua_future_wait(fu, -1));
		cua_future_free(fu);
		v[i] = now() - t0;
	}
	percentiles("launch + completion of one empty kernel", v, REPS);
}

static void
bench_one_client(cua_client *c, cua_function f, int launches)
{
	throughput(c, f, launches / 10, 1); /* warm-up */
	printf("%-44s %10.0f launches/s\n", "one client, futures", throughput(c, f, launches, 1));
	printf("%-44s %10.0f launches/s\n", "one client, fire-and-forget", throughput(c, f, launches, 0));
}

/* K client processes at once (forked at start-up, before this process touched NNG). Reaps them and frees
 * p->pids. Returns 0, or 1 when a pipe fails. */
static int
bench_clients(struct client_procs *p, const struct bench_opts *o)
{
	for (int k = 0; k < o->clients; k++)
		if (write(p->start[1], "s", 1) != 1)
			return 1;
	for (int k = 0; k < o->clients; k++) {
		char x;
		if (read(p->ready[0], &x, 1) != 1)
			return 1;
	}
	double t0 = now();
	for (int k = 0; k < o->clients; k++)
		if (write(p->go[1], "g", 1) != 1)
			return 1;
	for (int k = 0; k < o->clients; k++)
		waitpid(p->pids[k], NULL, 0);
	double dt = now() - t0;
	char label[64];
	snprintf(label, sizeof(label), "%d client processes, futures, aggregate", o->clients);
	printf("%-44s %10.0f launches/s\n", label, (double)o->clients * o->launches / dt);
	free(p->pids);
	return 0;
}

/* One warm-up copy to the device, then a timed copy each way between host and d. */
static void
bench_copy_pair(cua_client *c, cua_deviceptr d, void *host, size_t bytes, const char *htod, const char *dtoh)
{
	DIE(cua_memcpy_htod(c, d, host, bytes));
	double t0 = now();
	DIE(cua_memcpy_htod(c, d, host, bytes));
	double dt = now() - t0;
	printf("%-44s %10.2f GB/s (%zu MiB)\n", htod, bytes / dt / 1e9, bytes >> 20);
	t0 = now();
	DIE(cua_memcpy_dtoh(c, host, d, bytes));
	dt = now() - t0;
	printf("%-44s %10.2f GB/s (%zu MiB)\n", dtoh, bytes / dt / 1e9, bytes >> 20);
}

/* Copies through the daemon, then the same through shared host memory (ipc:// only). */
static void
bench_copies(cua_client *c, size_t bytes)
{
	void *host = malloc(bytes);
	memset(host, 0x5a, bytes);
	cua_deviceptr d;
	DIE(cua_mem_alloc(c, 0, bytes, &d));
	bench_copy_pair(c, d, host, bytes, "host to device through cuasyncd", "device to host through cuasyncd");
	void *shm;
	if (cua_host_alloc(c, 0, bytes, &shm) == CUA_OK) {
		memset(shm, 0x5a, bytes);
		bench_copy_pair(c, d, shm, bytes, "host to device, shared host buffer",
				"device to host, shared host buffer");
		DIE(cua_host_free(c, shm));
	}
	DIE(cua_mem_free(c, d));
	free(host);
}

/* MEM_ALLOC + MEM_FREE of `bytes`, `cycles` times after a few for warm-up: each free waits for the daemon's
 * scrub (--scrub on) of the block, so running this against --scrub on and --scrub off gives its cost. */
static void
bench_alloc(cua_client *c, size_t bytes, int cycles)
{
	cua_deviceptr d;
	for (int i = 0; i < 10; i++) {
		DIE(cua_mem_alloc(c, 0, bytes, &d));
		DIE(cua_mem_free(c, d));
	}
	double t0 = now();
	for (int i = 0; i < cycles; i++) {
		DIE(cua_mem_alloc(c, 0, bytes, &d));
		DIE(cua_mem_free(c, d));
	}
	double dt = now() - t0;
	char label[64];
	if (bytes % (1u << 20) == 0)
		snprintf(label, sizeof(label), "MEM_ALLOC + MEM_FREE of %zu MiB", bytes >> 20);
	else if (bytes % 1024 == 0)
		snprintf(label, sizeof(label), "MEM_ALLOC + MEM_FREE of %zu KiB", bytes >> 10);
	else
		snprintf(label, sizeof(label), "MEM_ALLOC + MEM_FREE of %zu bytes", bytes);
	printf("%-44s %10.0f cycles/s  %8.1f us/cycle (n=%d)\n", label, cycles / dt, dt / cycles * 1e6, cycles);
}

/* A new session's first work: connect (HELLO) and a first MEM_ALLOC, `n` sessions one after the other. With
 * --isolation session this includes taking (or starting) the session's own worker. */
static void
bench_new_sessions(int n)
{
	double *t = calloc((size_t)n, sizeof(*t));
	if (t == NULL)
		return;
	for (int i = 0; i < n; i++) {
		cua_client *c;
		cua_deviceptr d;
		double t0 = now();
		DIE(cua_connect(url, &c));
		DIE(cua_mem_alloc(c, 0, 4096, &d));
		t[i] = now() - t0;
		cua_disconnect(c);
	}
	percentiles("new session: connect + first MEM_ALLOC", t, n);
	free(t);
}

int
main(int argc, char **argv)
{
	struct bench_opts o = {.launches = 100000,
			       .clients = 4,
			       .bytes = 256u << 20,
			       .alloc_bytes = 64u << 20,
			       .alloc_cycles = 200,
			       .kernels = "empty",
			       .tenants = "1,4,8",
			       .graph_nodes = 100,
			       .rounds = 1000,
			       .copy_bytes = 64u << 20};
	struct client_procs p;
	int r = parse_options(argc, argv, &o);
	if (r != 0)
		return r;
	if (o.graph_compare) /* the same: before NNG */
		return graph_compare_main(&(struct graph_compare_opts){o.graph_nodes, o.rounds, module_path, url});
	if (o.compare) /* before this process touches NNG: it forks for every measurement */
		return compare_main(&(struct compare_opts){.kernels = o.kernels,
							   .tenants = o.tenants,
							   .launches = o.launches,
							   .daemon_only = o.daemon_only,
							   .module = module_path,
							   .url = url,
							   .copy_bytes = o.copy_bytes,
							   .feature_module = o.feature_module,
							   .argc = argc,
							   .argv = argv});
	if (!o.alloc_only && !o.latency_only && fork_clients(&p, &o) != 0)
		return 1;
	cua_client *c;
	DIE(cua_connect(url, &c));
	cua_device_info info;
	DIE(cua_device_get_info(c, 0, &info));
	printf("device 0: %s (sm_%d%d, %s backend)\n", info.name, info.sm_major, info.sm_minor, info.backend);
	if (!o.alloc_only) {
		cua_function f = setup(c, "empty_kernel");
		bench_latency(c, f);
		if (o.latency_only) {
			cua_disconnect(c);
			return 0;
		}
		bench_one_client(c, f, o.launches);
		if (bench_clients(&p, &o) != 0)
			return 1;
		bench_copies(c, o.bytes);
		bench_new_sessions(20);
	}
	bench_alloc(c, o.alloc_bytes, o.alloc_cycles);
	cua_disconnect(c);
	return 0;
}
