/*
 * native.h — the native columns of cuasync-bench --compare: the same kernels launched straight through the CUDA
 * driver API, which is loaded at run time (dlopen libcuda.so.1 + cuGetProcAddress, as the daemon's worker does),
 * so one static binary runs on a GPU machine and still starts where there is no driver.
 *
 * Each function is a tenant_fn (bench.h) taking a const struct bench_job *: it runs in a forked process, which
 * is the only place CUDA may be initialized (the comparing process forks many times and never calls cuInit).
 * Built without cuda.h (no HAVE_CUDA_H), every one of them fails with a message saying so.
 */
#ifndef CUABENCH_NATIVE_H
#define CUABENCH_NATIVE_H

#include "bench.h"

/* Loads the driver, device 0 and the module; out->msg receives the device's name (cuDeviceGetName). */
void native_probe_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

/* job->threads threads of this one process, one CUDA context (device 0's primary), a stream each: each
 * launches job->launches kernels back to back (cuLaunchKernel), then cuStreamSynchronize. */
void native_threads_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

/* One process (of P in a gang): its own context, one stream, launches back to back, cuStreamSynchronize. */
void native_process_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

/* Latency of launch + cuStreamSynchronize of one kernel, 2000 times: p50 and p99 in out. */
void native_latency_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

/* A graph of job->graph_nodes launches (stream capture, cuGraphInstantiateWithFlags), launched job->launches /
 * job->graph_nodes times back to back with cuGraphLaunch, then cuStreamSynchronize; launches counts kernels. */
void native_graph_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

#endif
