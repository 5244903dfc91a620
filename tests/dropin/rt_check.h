/* rt_check.h — the drop-in test programs' checks (rt_basic.cu, rt_graphs.cu): each prints "ok - …" or
 * "FAIL - … (line N)" and counts the failures; the program exits with failures != 0. */
#ifndef RT_CHECK_H
#define RT_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, what)                                                                                              \
	do {                                                                                                           \
		if (cond)                                                                                              \
			printf("ok - %s\n", what);                                                                     \
		else {                                                                                                 \
			printf("FAIL - %s (line %d)\n", what, __LINE__);                                               \
			failures++;                                                                                    \
		}                                                                                                      \
	} while (0)

#define CHECK_ERR(call, want)                                                                                          \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ == (want))                                                                                      \
			printf("ok - %s is %s\n", #call, cudaGetErrorName(want));                                      \
		else {                                                                                                 \
			printf("FAIL - %s: %s (%s), want %s (line %d)\n", #call, cudaGetErrorName(e_),                 \
			       cudaGetErrorString(e_), cudaGetErrorName(want), __LINE__);                              \
			failures++;                                                                                    \
		}                                                                                                      \
	} while (0)

#define OK(call) CHECK_ERR(call, cudaSuccess)

#endif
