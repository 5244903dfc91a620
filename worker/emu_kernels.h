/*
 * emu_kernels.h — the emulated device's built-in kernel library. Names and parameter layouts match
 * tests/kernels/test_kernels.cu exactly; each runs over its whole grid on the calling stream thread (the
 * thread of the stream it was launched on, in stream order; kernels keep no state of their own).
 */
#ifndef CUAW_EMU_KERNELS_H
#define CUAW_EMU_KERNELS_H

#include "cua_proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emu;
struct emu_dims {
	uint32_t grid[3], block[3];
	uint32_t shared_mem; /* dynamic shared memory bytes of the launch */
	uint64_t global;     /* the device address of the module global the kernel reads (emu_kernel.global), or 0 */
	uint32_t cluster[3]; /* blocks per cluster: the launch's, else the kernel's required one, else 1x1x1 */
	bool cooperative;    /* launched cooperatively: the grid is co-resident and may synchronise as a whole */
};

/* Device memory view for kernels: a host pointer for [addr, addr+len), or NULL (an illegal address). Any
 * thread; valid while the allocation lives (the front-end frees memory only after the work using it). */
void *emu_ptr(struct emu *E, uint64_t addr, uint64_t len);

/* Runs the kernel over params (the argument buffer, laid out as in params[] of the row). Returns 0, or -1
 * after writing the CUDA error name and a description into fault (a sticky fault). */
typedef int (*emu_kernel_fn)(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len);

struct emu_kernel {
	const char *name;
	uint32_t nparams;
	cua_param_info params[4];
	emu_kernel_fn fn;
	const char *global;    /* the module global it reads (a __constant__ array in CUDA), or NULL */
	uint32_t global_bytes; /* the bytes it may read there: the image must declare at least these */
};

extern const struct emu_kernel emu_kernels[];
extern const size_t emu_nkernels; /* at most 64: a module's kernels are a bit set */

/* The index in emu_kernels of the kernel named name[0..len) (not NUL-terminated), or -1. */
int emu_kernel_find(const char *name, size_t len);
/* Writes the built-in kernels' names, comma-separated, into buf (always terminated). Returns buf. */
const char *emu_kernel_list(char *buf, size_t cap);

#endif
