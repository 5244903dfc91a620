/*
 * graphcmp.c — cuasync-bench --graph-compare (graphcmp.h): N empty kernels per round as N launches and as one
 * graph, natively and through cuasyncd. Through the daemon a round of launches is N launches coalesced into
 * BATCH messages; a round of the graph is one GRAPH_LAUNCH message of a few bytes. Every measurement is one
 * forked tenant (gang.c), launching on a stream of its own, fire-and-forget, then waiting once for all.
 */
#include "graphcmp.h"

#include "bench.h"
#include "cuasync.h"
#include "native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GANG_TIMEOUT_S 900.0

static const char emu_image[] = "cuasync-emu-module\nempty_kernel\n";

struct cuad_graph_tenant {
	cua_client *c;
	cua_function f;
	cua_stream s;
};

#define CUA_CK(call)                                                                                                   \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_) {                                                                                             \
			snprintf(err, len, "%s: %s: %s", #call, cua_strerror_name(rc_), cua_last_error());             \
			return -1;                                                                                     \
		}                                                                                                      \
	} while (0)

static int
cuad_open(const struct bench_job *job, struct cuad_graph_tenant *t, char *err, size_t len)
{
	cua_module m;
	memset(t, 0, sizeof(*t));
	CUA_CK(cua_connect(job->url, &t->c));
	if (job->module != NULL && access(job->module, R_OK) == 0)
		CUA_CK(cua_module_load_file(t->c, 0, job->module, &m));
	else
		CUA_CK(cua_module_load(t->c, 0, emu_image, sizeof(emu_image) - 1, &m));
	CUA_CK(cua_module_get_function(t->c, m, job->kernel->fn, &t->f));
	CUA_CK(cua_stream_create(t->c, 0, 0, &t->s));
	return 0;
}

static cua_launch *
empty_launch(const struct bench_job *job, struct cuad_graph_tenant *t)
{
	cua_launch *l = cua_launch_new(t->c, t->f);
	if (l != NULL)
		cua_launch_set_config(l, (cua_launch_config){{job->kernel->grid, 1, 1}, {job->kernel->block, 1, 1}, 0});
	if (l != NULL)
		cua_launch_set_stream(l, t->s);
	return l;
}

/* rounds × nodes launches, fire-and-forget, then SYNCHRONIZE. */
static int
cuad_rounds_launches(const struct bench_job *job, struct cuad_graph_tenant *t, int rounds, char *err, size_t len)
{
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < job->graph_nodes; i++)
			CUA_CK(cua_launch_submit(empty_launch(job, t), NULL));
	CUA_CK(cua_synchronize(t->c));
	return 0;
}

/* rounds launches of graph g, fire-and-forget, then SYNCHRONIZE. */
static int
cuad_rounds_graph(struct cuad_graph_tenant *t, cua_graph g, int rounds, char *err, size_t len)
{
	for (int r = 0; r < rounds; r++)
		CUA_CK(cua_graph_launch(t->c, g, t->s, NULL));
	CUA_CK(cua_synchronize(t->c));
	return 0;
}

static int
cuad_graph_make(const struct bench_job *job, struct cuad_graph_tenant *t, cua_graph *g, char *err, size_t len)
{
	cua_batch *b = cua_graph_begin(t->c);
	for (int i = 0; i < job->graph_nodes; i++)
		CUA_CK(cua_batch_add_launch(b, empty_launch(job, t)));
	CUA_CK(cua_graph_instantiate(b, g));
	return 0;
}

static void
cuad_launches_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct cuad_graph_tenant t;
	int rounds = job->launches / job->graph_nodes;
	(void)k;
	if (cuad_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    cuad_rounds_launches(job, &t, bench_warmup(rounds), out->msg, sizeof(out->msg)) != 0 ||
	    tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (cuad_rounds_launches(job, &t, rounds, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = (double)rounds * job->graph_nodes;
	out->ok = 1;
	cua_disconnect(t.c);
}

static void
cuad_graph_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct cuad_graph_tenant t;
	cua_graph gr;
	int rounds = job->launches / job->graph_nodes;
	(void)k;
	if (cuad_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    cuad_graph_make(job, &t, &gr, out->msg, sizeof(out->msg)) != 0 ||
	    cuad_rounds_graph(&t, gr, bench_warmup(rounds), out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (cuad_rounds_graph(&t, gr, rounds, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = (double)rounds * job->graph_nodes;
	out->ok = 1;
	cua_disconnect(t.c);
}

/* One measurement: kernels/s, or 0 with why in err. */
static double
measure(tenant_fn fn, struct bench_job *job, char *err, size_t len)
{
	double rate = 0;
	if (gang_run(1, fn, job, GANG_TIMEOUT_S, &rate, NULL, err, len) != 0)
		return 0;
	return rate;
}

static void
print_pair(const char *who, int nodes, double launches, double graph, const char *why)
{
	char col[64];
	snprintf(col, sizeof(col), "%s, %d launches", who, nodes);
	if (launches > 0)
		printf("%-40s %12.0f kernels/s\n", col, launches);
	else
		printf("%-40s %12s (%s)\n", col, "-", why);
	snprintf(col, sizeof(col), "%s, one graph of %d", who, nodes);
	if (graph > 0 && launches > 0)
		printf("%-40s %12.0f kernels/s   graph/launches %.2fx\n", col, graph, graph / launches);
	else if (graph > 0)
		printf("%-40s %12.0f kernels/s\n", col, graph);
	else
		printf("%-40s %12s (%s)\n", col, "-", why);
}

int
graph_compare_main(const struct graph_compare_opts *o)
{
	struct bench_kernel k;
	char nwhy[256] = "", cwhy[256] = "";
	if (bench_kernel_parse("empty", 5, &k) != 0 || o->nodes < 1 || o->nodes > 4096 || o->rounds < 1) {
		fprintf(stderr, "cuasync-bench: --graph takes 1..4096 kernels, --rounds at least 1\n");
		return 2;
	}
	struct bench_job job = {&k, o->rounds * o->nodes, 1, 1, o->module, o->url, o->nodes};
	printf("## cuasync-bench --graph-compare: %d empty kernels per round (%u x %u threads), %d rounds, one "
	       "stream\n\n",
	       o->nodes, k.grid, k.block, o->rounds);
	double nl = measure(native_process_tenant, &job, nwhy, sizeof(nwhy));
	double ng = nl > 0 ? measure(native_graph_tenant, &job, nwhy, sizeof(nwhy)) : 0;
	double cl = measure(cuad_launches_tenant, &job, cwhy, sizeof(cwhy));
	double cg = measure(cuad_graph_tenant, &job, cwhy, sizeof(cwhy));
	print_pair("native", o->nodes, nl, ng, nwhy);
	print_pair("cuasyncd", o->nodes, cl, cg, cwhy);
	if (nl > 0 && ng > 0 && cl > 0 && cg > 0)
		printf("\ncuasyncd/native: launches %.2fx, graph %.2fx\n", cl / nl, cg / ng);
	return cl > 0 && cg > 0 ? 0 : 1;
}
