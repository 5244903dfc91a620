/*
 * compare.h — cuasync-bench --compare: the same kernel, launch count and number of tenants natively (threads of
 * one process, separate processes, separate processes under MPS) and through cuasyncd (own streams, the pool),
 * in one run, printed as a table per kernel with the ratios to the native figures. Then, from the same run:
 * sync latency and PING with libcuasync's shared-memory channel on and off, pinned async copies each way, and
 * launches of a kernel taking a 32000-byte argument, each beside its native counterpart.
 */
#ifndef CUABENCH_COMPARE_H
#define CUABENCH_COMPARE_H

#include <stddef.h>

struct compare_opts {
	const char *kernels;        /* "empty", "spin:CYCLES", "axpy:N", comma-separated */
	const char *tenants;        /* "1,4,8" */
	int launches;               /* per tenant */
	int daemon_only;            /* skip the native and MPS columns (A/B runs of daemon options) */
	const char *module;         /* the fatbin */
	const char *url;            /* the daemon; NULL: CUASYNC_URL */
	size_t copy_bytes;          /* the async copy rows: bytes of one copy each way */
	const char *feature_module; /* feature_kernels.fatbin (the large-argument row); NULL: beside --module */
	int argc;                   /* the command line, printed */
	char **argv;
};

/* Runs the comparison and prints it to stdout. Must be called before this process touches CUDA or NNG (it
 * forks for every measurement). Returns the exit status: 0, 1 when a cuasyncd measurement failed, 2 on bad
 * options. */
int compare_main(const struct compare_opts *o);

#endif
