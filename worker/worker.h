/*
 * worker.h — the GPU worker process, as daemon/main.c starts it: one per device, spawned by the front-end
 * with fork+exec (`cuasyncd --worker FD ...`) before anything touches CUDA. It reads command records
 * (link/wrec.h) from the shared-memory ring, runs them through its backend, and writes one completion record
 * per request once all of the request's work has finished.
 */
#ifndef CUAW_WORKER_H
#define CUAW_WORKER_H

#include "cua_error.h"

#include <stdbool.h>
#include <stdint.h>

struct worker_opts {
	int shm_fd; /* the shared region (link/wrec.h); the worker maps it and closes the fd */
	int device;
	uint32_t generation;
	const char *backend; /* "emu" or "cuda" */
	int emu_sm;          /* e.g. 90 */
	uint64_t emu_mem;
	unsigned pool_streams;
	bool scrub; /* clear device memory on free before it can be allocated again (backend.h: mem_free) */
	/* emu: the most threads running stream work (0: derived from the cores) */
	unsigned emu_threads;
	/* threads issuing stream work, each owning the streams sid % N (0: derived from the cores; 1: the command
	 * loop issues everything itself) */
	unsigned submit_threads;
};

/* Runs the worker in the calling (freshly exec'd) process until the front-end's shutdown record or its death.
 * Returns the process exit status. A sticky device fault ends the process from inside (never returns). */
int worker_main(const struct worker_opts *o);

#ifdef HAVE_CUDA_H
/* Loads the driver and counts devices: 0 and *count >= 1, or an error saying why no GPU is usable.
 * Initialises CUDA in the calling process: the front-end runs it in a child (`cuasyncd --cuda-probe`). */
int cuda_probe(int *count, cua_err *e);
/* After cuda_probe: the UUID of the device of this ordinal as nvidia-smi -L and CUDA_VISIBLE_DEVICES write it,
 * "GPU-" and 32 hex digits in groups 8-4-4-4-12, into buf (at least 41 bytes). 0 or a status. */
int cuda_probe_uuid(int ordinal, char *buf, size_t len, cua_err *e);
#endif

#endif
