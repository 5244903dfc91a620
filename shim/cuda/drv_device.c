/*
 * drv_device.c — initialisation, versions, devices and contexts. Every context of the process maps onto its
 * one session: memory, modules and streams belong to the session, not to the context that made them, and live
 * until freed or the process exits (cuCtxDestroy frees nothing of them).
 */
#include "config.h"

#include "dropin_attrs.h"
#include "drv.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRV_MAX_PRIMARY 64
static uint64_t primary[DRV_MAX_PRIMARY]; /* primary context handle per device; 0 until retained (atomic) */

CUresult CUDAAPI
cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return drv_init();
}

CUresult CUDAAPI
cuDriverGetVersion(int *driverVersion)
{
	if (driverVersion == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = CUDA_VERSION; /* the API of the cuda.h this library was built against */
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGetCount(int *count)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r == CUDA_SUCCESS && count == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*count = drv_device_count();
	return r;
}

CUresult CUDAAPI
cuDeviceGet(CUdevice *device, int ordinal)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(ordinal, &info);
	if (r == CUDA_SUCCESS && device == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*device = ordinal;
	return r;
}

CUresult CUDAAPI
cuDeviceGetName(char *name, int len, CUdevice dev)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && (name == NULL || len <= 0))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		snprintf(name, (size_t)len, "%s", info->name);
	return r;
}

CUresult CUDAAPI
cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && bytes == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*bytes = (size_t)info->total_mem;
	return r;
}

/* The attributes the daemon reports (cua_device_info), one row each; the others are refused rather than
 * guessed. */
static const struct drv_attr_row {
	CUdevice_attribute attr;
	size_t offset; /* of a 32-bit field of cua_device_info */
} drv_attrs[] = {
	{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(cua_device_info, sm_major)},
	{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(cua_device_info, sm_minor)},
	{CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(cua_device_info, multiprocessors)},
	{CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(cua_device_info, max_shared_optin)},
	{CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, offsetof(cua_device_info, cooperative_launch)},
	{CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, offsetof(cua_device_info, cluster_launch)},
};
_Static_assert(sizeof(((cua_device_info *)0)->max_shared_optin) == sizeof(int), "drv_attrs reads 32-bit fields");

CUresult CUDAAPI
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && pi == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	cua_client *c;
	if (r == CUDA_SUCCESS)
		r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	/* what the GPU's driver answered on the daemon's host, less what the drop-in does not offer */
	if (dropin_device_attribute(c, info->index, (int)attrib, pi) == 0)
		return CUDA_SUCCESS;
	for (size_t i = 0; i < sizeof(drv_attrs) / sizeof(drv_attrs[0]); i++) /* an older daemon's few */
		if (drv_attrs[i].attr == attrib) {
			memcpy(pi, (const char *)info + drv_attrs[i].offset, sizeof(int));
			return CUDA_SUCCESS;
		}
	if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE; /* as CUDA answers an attribute it does not know */
	char call[64];
	snprintf(call, sizeof(call), "cuDeviceGetAttribute(attribute %d)", (int)attrib);
	return drv_refuse(call, "the GPU's driver on the daemon's host does not answer it (or the daemon is older "
				"than this library); query it with nvidia-smi on that host");
}

CUresult CUDAAPI
cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && (major == NULL || minor == NULL))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		*major = info->sm_major;
		*minor = info->sm_minor;
	}
	return r;
}

/* cuasyncd does not report the GPU's UUID: this one is derived from the device's index and name (stable for one
 * daemon configuration, marked as a name-based RFC 4122 UUID), never the hardware's. */
CUresult CUDAAPI
cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && uuid == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		return r;
	uint64_t h[2] = {14695981039346656037ull, 1099511628211ull ^ (uint64_t)dev};
	for (int k = 0; k < 2; k++) {
		for (const char *p = info->name; *p; p++)
			h[k] = (h[k] ^ (unsigned char)*p) * 1099511628211ull;
		h[k] = (h[k] ^ (uint64_t)dev) * 1099511628211ull;
	}
	memcpy(uuid->bytes, h, sizeof(uuid->bytes));
	uuid->bytes[6] = (char)((uuid->bytes[6] & 0x0f) | 0x50);
	uuid->bytes[8] = (char)((uuid->bytes[8] & 0x3f) | 0x80);
	return CUDA_SUCCESS;
}
DRV_ALIAS(cuDeviceGetUuid_v2, cuDeviceGetUuid);

/* ---- contexts ---- */

static CUresult
ctx_new(int dev, bool is_primary, uint64_t *h)
{
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r != CUDA_SUCCESS)
		return r;
	struct drv_obj *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = DRV_CTX;
	o->u.ctx.dev = dev;
	o->u.ctx.primary = is_primary;
	if ((*h = drv_handle_new(o)) == 0) {
		free(o);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (pctx == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	const cua_device_info *info;
	CUresult r = drv_device_info(dev, &info);
	if (r != CUDA_SUCCESS || dev >= DRV_MAX_PRIMARY)
		return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_DEVICE;
	uint64_t h = __atomic_load_n(&primary[dev], __ATOMIC_ACQUIRE), mine = 0;
	if (h == 0 && (r = ctx_new(dev, true, &mine)) == CUDA_SUCCESS) {
		uint64_t expected = 0;
		if (__atomic_compare_exchange_n(&primary[dev], &expected, mine, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			h = mine;
		else {
			free(drv_handle_take(mine, DRV_CTX)); /* another thread's won */
			h = expected;
		}
	}
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)(uintptr_t)h;
	return r;
}

/* The primary context stays valid for the process's life: releasing it frees nothing. */
CUresult CUDAAPI
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	const cua_device_info *info;
	return drv_device_info(dev, &info);
}
DRV_ALIAS(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease);

CUresult CUDAAPI
cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	uint64_t h;
	if (pctx == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = ctx_new(dev, false, &h);
	if (r == CUDA_SUCCESS && (r = drv_ctx_push(h)) != CUDA_SUCCESS)
		free(drv_handle_take(h, DRV_CTX));
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)(uintptr_t)h;
	return r;
}
DRV_ALIAS(cuCtxCreate_v2, cuCtxCreate);

CUresult CUDAAPI
cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags, CUdevice dev)
{
	if (numParams > 0)
		return drv_refuse("cuCtxCreate with execution affinity", "create the context without affinity "
									 "parameters; cuasyncd shares the GPU itself");
	return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult CUDAAPI
cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev)
{
	if (ctxCreateParams != NULL &&
	    (ctxCreateParams->numExecAffinityParams > 0 || ctxCreateParams->cigParams != NULL))
		return drv_refuse("cuCtxCreate with execution affinity or CIG parameters",
				  "pass NULL parameters; cuasyncd shares the GPU itself");
	return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult CUDAAPI
cuCtxDestroy_v2(CUcontext ctx)
{
	uint64_t h = (uintptr_t)ctx;
	struct drv_obj *o = drv_handle_get(h, DRV_CTX);
	if (o == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (o->u.ctx.primary)
		return CUDA_ERROR_INVALID_CONTEXT; /* as CUDA: a primary context is released, not destroyed */
	if (drv_ctx_top() == h)
		(void)drv_ctx_pop();
	free(drv_handle_take(h, DRV_CTX));
	return CUDA_SUCCESS;
}
DRV_ALIAS(cuCtxDestroy_v2, cuCtxDestroy);

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *pctx)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r == CUDA_SUCCESS && pctx == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)(uintptr_t)(drv_handle_get(drv_ctx_top(), DRV_CTX) != NULL ? drv_ctx_top() : 0);
	return r;
}

CUresult CUDAAPI
cuCtxSetCurrent(CUcontext ctx)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (ctx != NULL && drv_handle_get((uintptr_t)ctx, DRV_CTX) == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	drv_ctx_set_top((uintptr_t)ctx);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxPushCurrent_v2(CUcontext ctx)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (drv_handle_get((uintptr_t)ctx, DRV_CTX) == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	return drv_ctx_push((uintptr_t)ctx);
}
DRV_ALIAS(cuCtxPushCurrent_v2, cuCtxPushCurrent);

CUresult CUDAAPI
cuCtxPopCurrent_v2(CUcontext *pctx)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (drv_ctx_top() == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	uint64_t h = drv_ctx_pop();
	if (pctx != NULL)
		*pctx = (CUcontext)(uintptr_t)h;
	return CUDA_SUCCESS;
}
DRV_ALIAS(cuCtxPopCurrent_v2, cuCtxPopCurrent);

CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r == CUDA_SUCCESS && device == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*device = dev;
	return r;
}

/* Waits for all the process's work (the session's), and reports the first asynchronous failure since the last
 * synchronisation, as CUDA reports a kernel's fault at the next synchronising call. */
CUresult CUDAAPI
cuCtxSynchronize(void)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	return r != CUDA_SUCCESS ? r : drv_synchronize(c);
}
