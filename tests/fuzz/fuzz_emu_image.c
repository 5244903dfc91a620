/* libFuzzer harness for the emulated device's module loader: any bytes, in every format, must be accepted or
 * refused with CUA_EMODULE and a message, never read out of bounds. First byte: the format (0..4). */
#include "config.h"

#include "emu_image.h"
#include "emu_kernels.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* emu_kernels.c runs kernels through the backend's memory view; the loader never calls it. */
void *
emu_ptr(struct emu *E, uint64_t addr, uint64_t len)
{
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint64_t kernels;
	cua_err e;
	int r = emu_image_check(data + 1, size - 1, data[0] % 5, &kernels, &e);
	if ((r != 0 && (r != CUA_EMODULE || kernels != 0 || e.detail[0] == '\0')) || (r == 0 && kernels == 0))
		abort();
	return 0;
}
