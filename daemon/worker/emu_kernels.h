/*
 * emu_kernels.h — the emulated device's built-in kernel library. Names and parameter layouts match
 * tests/kernels/test_kernels.cu exactly; each runs over its whole grid on the calling stream thread.
 */
#ifndef CUAD_EMU_KERNELS_H
#define CUAD_EMU_KERNELS_H

#include "cua_proto.h"
#include "wproto.h"

#include <stddef.h>
#include <stdint.h>

struct emu;
/* Device memory view for kernels: a host pointer for [addr, addr+len), or NULL (an illegal address). */
void *emu_ptr(struct emu *E, uint64_t addr, uint64_t len);

/* Returns 0, or -1 after writing the CUDA error name and a description into fault (a sticky fault). */
typedef int (*emu_kernel_fn)(struct emu *E, const struct wlaunch_dims *d, void **params, char *fault, size_t len);

struct emu_kernel {
	const char *name;
	uint32_t nparams;
	cua_param_info params[4];
	emu_kernel_fn fn;
};

extern const struct emu_kernel emu_kernels[];
extern const size_t emu_nkernels;

#endif
