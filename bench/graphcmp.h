/*
 * graphcmp.h — cuasync-bench --graph-compare: N small kernels per round, as N launches and as one CUDA graph of
 * N nodes, natively (the driver API, native.c) and through cuasyncd, printed as kernels/s with the ratios.
 */
#ifndef CUABENCH_GRAPHCMP_H
#define CUABENCH_GRAPHCMP_H

struct graph_compare_opts {
	int nodes;          /* kernels per round (--graph N, default 100) */
	int rounds;         /* rounds timed (--rounds R, default 1000) */
	const char *module; /* the fatbin (native: required) */
	const char *url;    /* the daemon; NULL: CUASYNC_URL */
};

/* Runs the four measurements, each in forked processes (this process never touches CUDA or NNG), and prints
 * them. Returns 0, or 1 when a cuasyncd measurement failed. */
int graph_compare_main(const struct graph_compare_opts *o);

#endif
