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

/* job->copy_bytes between a cuMemHostAlloc buffer and device memory (job->copy_dtoh picks the direction) with
 * cuMemcpyHtoDAsync / cuMemcpyDtoHAsync on a stream + cuStreamSynchronize, BENCH_COPY_REPS times after
 * BENCH_COPY_WARMUP: out->launches holds the bytes copied, so gang_run's rate is bytes/s. */
void native_copy_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

/* big_param_copy of job->feature_module with its 32000-byte by-value argument (kernelParams): BENCH_BIG_PIPELINED
 * launches back to back + cuStreamSynchronize timed in t0..t1 (launches), then launch + cuStreamSynchronize
 * BENCH_LAT_REPS times: p50 and p99. */
void native_big_param_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out);

#endif
