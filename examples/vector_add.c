/*
 * vector_add — the main job of cuasyncd, end to end: load the test kernels, allocate, copy, launch
 * axpy (y = a*x + y) through the daemon, copy back and check every element.
 *
 * usage: vector_add [module-file] [n]     (the daemon is found through $CUASYNC_URL)
 */
#include "cuasync.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                                    \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_ != CUA_OK) {                                                                                   \
			fprintf(stderr, "vector_add: %s failed: %s: %s\n", #call, cua_strerror_name(rc_),              \
				cua_last_error()[0] ? cua_last_error() : cua_strerror(rc_));                           \
			return 1;                                                                                      \
		}                                                                                                      \
	} while (0)

/* For the emulated device without nvcc: an image that names the built-in kernels. */
static const char emu_image[] = "cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n";

int
main(int argc, char **argv)
{
	const char *module = argc > 1 ? argv[1] : CUA_BUILDDIR "/tests/kernels/test_kernels.fatbin";
	size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : (1u << 20);
	cua_client *c;
	CHECK(cua_connect(NULL, &c));
	cua_device_info info;
	CHECK(cua_device_get_info(c, 0, &info));
	printf("device 0: %s (sm_%d%d, %llu MiB, %s backend)\n", info.name, info.sm_major, info.sm_minor,
	       (unsigned long long)(info.total_mem >> 20), info.backend);

	cua_module mod;
	FILE *probe = fopen(module, "rb");
	if (probe) {
		fclose(probe);
		CHECK(cua_module_load_file(c, 0, module, &mod));
		printf("loaded %s\n", module);
	} else if (strcmp(info.backend, "emu") == 0) {
		CHECK(cua_module_load(c, 0, emu_image, sizeof(emu_image) - 1, &mod));
		printf("no %s: loaded the emulated device's kernel list\n", module);
	} else {
		fprintf(stderr, "vector_add: module %s not found (build with nvcc to get it)\n", module);
		return 1;
	}
	cua_function axpy;
	CHECK(cua_module_get_function(c, mod, "axpy", &axpy));

	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
	if (!x || !y || !out)
		return 1;
	for (size_t i = 0; i < n; i++) {
		x[i] = (float)(i % 1000) * 0.5f;
		y[i] = (float)(i % 7);
	}
	cua_deviceptr dx, dy;
	CHECK(cua_mem_alloc(c, 0, n * sizeof(float), &dx));
	CHECK(cua_mem_alloc(c, 0, n * sizeof(float), &dy));
	CHECK(cua_memcpy_htod(c, dx, x, n * sizeof(float)));
	CHECK(cua_memcpy_htod(c, dy, y, n * sizeof(float)));

	const float a = 2.0f;
	cua_launch *l = cua_launch_new(c, axpy);
	cua_launch_push_f32(l, a);
	cua_launch_push_device_ptr(l, dx);
	cua_launch_push_device_ptr(l, dy);
	cua_launch_push_u64(l, n);
	cua_launch_set_config(l,
			      (cua_launch_config){{(uint32_t)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535), 1, 1},
						  {256, 1, 1},
						  0});
	cua_future *f;
	CHECK(cua_launch_submit(l, &f));
	CHECK(cua_future_wait(f, -1));
	cua_future_free(f);
	CHECK(cua_memcpy_dtoh(c, out, dy, n * sizeof(float)));

	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		if (out[i] != fmaf(a, x[i], y[i])) /* nvcc fuses a * x + y into one FMA */
			bad++;
	printf("axpy on %zu elements through cuasyncd: %s (%zu mismatches)\n", n, bad ? "WRONG" : "correct", bad);
	CHECK(cua_mem_free(c, dx));
	CHECK(cua_mem_free(c, dy));
	CHECK(cua_module_unload(c, mod));
	cua_disconnect(c);
	free(x);
	free(y);
	free(out);
	return bad ? 1 : 0;
}
