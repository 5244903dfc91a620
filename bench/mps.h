/*
 * mps.h — a private MPS control daemon for cuasync-bench --compare: its own pipe and log directories in a
 * temporary directory (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY, exported to the processes forked while
 * it runs, so they become its clients), started with `nvidia-cuda-mps-control -d` and stopped with
 * `echo quit | nvidia-cuda-mps-control` — by mps_stop, or at exit or on SIGINT/SIGTERM/SIGHUP if the bench
 * goes first. One at a time, from the comparing process only (never from a forked tenant).
 */
#ifndef CUABENCH_MPS_H
#define CUABENCH_MPS_H

#include <stddef.h>

/* Whether nvidia-cuda-mps-control is on PATH. */
int mps_available(void);

/* Starts the daemon. Returns 0 when it runs, or -1 with the reason in err (nothing left running). */
int mps_start(char *err, size_t len);

/* Stops the daemon, waits for it to go, removes its directories and unsets the variables. Idempotent. */
void mps_stop(void);

#endif
