/*
 * cuda_drv.c — the CUDA driver, loaded at run time (dlopen libcuda.so.1 and cuGetProcAddress for every entry
 * point), so cuasyncd builds and starts on machines without a driver: the table of entry points, the probe, and
 * the error helpers every CUDA file uses. The bottom of the CUDA backend's files (cuda_impl.h, "Layers").
 */
#include "config.h"

#include "cuda_impl.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

struct cuda_drv drv;

const char *
errname(CUresult r)
{
	const char *n = NULL;
	if (drv.cuGetErrorName == NULL || drv.cuGetErrorName(r, &n) != CUDA_SUCCESS || n == NULL)
		return "CUDA_ERROR_UNKNOWN";
	return n;
}

const char *
errstr(CUresult r)
{
	const char *s = NULL;
	if (drv.cuGetErrorString == NULL || drv.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
		return "";
	return s;
}

int
is_sticky(CUresult r)
{
	switch ((int)r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_UNKNOWN: return 1;
	default: return 0;
	}
}

int
cu_load_driver(cua_err *e)
{
	static int loaded;
	if (loaded)
		return 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		return cua_err_set(e, CUA_ENO_DEVICE, "no NVIDIA driver: cannot load libcuda.so.1 (%s)", dlerror());
	__typeof__(cuGetProcAddress) *gpa = (__typeof__(cuGetProcAddress) *)dlsym(h, "cuGetProcAddress_v2");
	if (gpa == NULL)
		return cua_err_set(e, CUA_ENO_DEVICE,
				   "NVIDIA driver too old: no cuGetProcAddress_v2 (need CUDA 12.4+)");
	CUdriverProcAddressQueryResult q;
#define CUDA_FN_LOAD(name)                                                                                             \
	if (gpa(#name, (void **)&drv.name, CUDA_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||       \
	    drv.name == NULL)                                                                                          \
		return cua_err_set(e, CUA_ENO_DEVICE, "NVIDIA driver too old: no %s (need CUDA 12.4+)", #name);
	CUDA_FNS(CUDA_FN_LOAD)
	CUDA_GRAPH_FNS(CUDA_FN_LOAD)
#undef CUDA_FN_LOAD
	CUresult r = drv.cuInit(0);
	if (r != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "cuInit failed: %s (%s)", errname(r), errstr(r));
	int ver = 0;
	drv.cuDriverGetVersion(&ver);
	if (ver < CUDA_API_VERSION)
		return cua_err_set(e, CUA_ENO_DEVICE, "NVIDIA driver too old: supports CUDA %d.%d, need 12.4",
				   ver / 1000, ver % 1000 / 10);
	loaded = 1;
	return 0;
}

int
cuda_probe(int *count, cua_err *e)
{
	int r = cu_load_driver(e);
	if (r != 0)
		return r;
	CUresult cr = drv.cuDeviceGetCount(count);
	if (cr != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "cuDeviceGetCount: %s", errname(cr));
	if (*count == 0)
		return cua_err_set(e, CUA_ENO_DEVICE, "the NVIDIA driver sees no GPU");
	return 0;
}

int
cuda_probe_uuid(int ordinal, char *buf, size_t len, cua_err *e)
{
	CUdevice dev;
	CUuuid u;
	CUresult r = drv.cuDeviceGet(&dev, ordinal);
	if (r == CUDA_SUCCESS)
		r = drv.cuDeviceGetUuid(&u, dev);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuDeviceGetUuid");
	const unsigned char *b = (const unsigned char *)u.bytes;
	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

int
cerr(cua_err *e, CUresult r, const char *what)
{
	return cua_err_set(e, r == CUDA_ERROR_OUT_OF_MEMORY ? CUA_ENOMEM : CUA_EDEVICE, "%s: %s: %s", errname(r), what,
			   errstr(r));
}
