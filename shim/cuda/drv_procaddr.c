/*
 * drv_procaddr.c — cuGetProcAddress: the entry points CUDA 12+ programs and runtimes resolve by name and API
 * version, one row per (name, first CUDA version of that ABI, function).
 */
#include "config.h"

#include "drv.h"
#include "drv_stubs.h"

#include <stdio.h>
#include <string.h>

static const struct drv_proc_row {
	const char *name;
	int version; /* the row serves cudaVersion >= version, until a later row of the name */
	void *fn;
} drv_procs[] = {
#define F(name, version, fn)                                                                                           \
	{                                                                                                              \
		name, version, (void *)fn                                                                              \
	}
	F("cuInit", 2000, cuInit),
	F("cuDriverGetVersion", 2020, cuDriverGetVersion),
	F("cuGetErrorName", 6000, cuGetErrorName),
	F("cuGetErrorString", 6000, cuGetErrorString),
	F("cuGetProcAddress", 11030, cuGetProcAddress),
	F("cuGetProcAddress", 12000, cuGetProcAddress_v2),
	F("cuDeviceGet", 2000, cuDeviceGet),
	F("cuDeviceGetCount", 2000, cuDeviceGetCount),
	F("cuDeviceGetName", 2000, cuDeviceGetName),
	F("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
	F("cuDeviceComputeCapability", 2000, cuDeviceComputeCapability),
	F("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
	F("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
	F("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
	F("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	F("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
	F("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
	F("cuCtxCreate", 2000, cuCtxCreate),
	F("cuCtxCreate", 3020, cuCtxCreate_v2),
	F("cuCtxCreate", 11040, cuCtxCreate_v3),
	F("cuCtxCreate", 12050, cuCtxCreate_v4),
	F("cuCtxDestroy", 2000, cuCtxDestroy),
	F("cuCtxDestroy", 4000, cuCtxDestroy_v2),
	F("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
	F("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
	F("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
	F("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
	F("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	F("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	F("cuCtxGetDevice", 2000, cuCtxGetDevice),
	F("cuCtxSynchronize", 2000, cuCtxSynchronize),
	F("cuModuleLoad", 2000, cuModuleLoad),
	F("cuModuleLoadData", 2000, cuModuleLoadData),
	F("cuModuleLoadDataEx", 2010, cuModuleLoadDataEx),
	F("cuModuleLoadFatBinary", 2000, cuModuleLoadFatBinary),
	F("cuModuleUnload", 2000, cuModuleUnload),
	F("cuModuleGetFunction", 2000, cuModuleGetFunction),
	F("cuModuleGetGlobal", 3020, cuModuleGetGlobal_v2),
	F("cuFuncGetAttribute", 2020, cuFuncGetAttribute),
	F("cuFuncSetAttribute", 9000, cuFuncSetAttribute),
	F("cuFuncSetCacheConfig", 3000, cuFuncSetCacheConfig),
	F("cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, cuOccupancyMaxActiveBlocksPerMultiprocessor),
	F("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000,
	  cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
	F("cuOccupancyMaxPotentialBlockSize", 6050, cuOccupancyMaxPotentialBlockSize),
	F("cuOccupancyMaxPotentialBlockSizeWithFlags", 7000, cuOccupancyMaxPotentialBlockSizeWithFlags),
	F("cuLaunchKernel", 4000, cuLaunchKernel),
	F("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
	F("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel),
	F("cuMemAlloc", 3020, cuMemAlloc_v2),
	F("cuMemFree", 3020, cuMemFree_v2),
	F("cuMemGetInfo", 3020, cuMemGetInfo_v2),
	F("cuMemAllocHost", 3020, cuMemAllocHost_v2),
	F("cuMemHostAlloc", 2020, cuMemHostAlloc),
	F("cuMemFreeHost", 2000, cuMemFreeHost),
	F("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
	F("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
	F("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
	F("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
	F("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
	F("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
	F("cuMemsetD8", 3020, cuMemsetD8_v2),
	F("cuMemsetD16", 3020, cuMemsetD16_v2),
	F("cuMemsetD32", 3020, cuMemsetD32_v2),
	F("cuMemsetD8Async", 3020, cuMemsetD8Async),
	F("cuMemsetD16Async", 3020, cuMemsetD16Async),
	F("cuMemsetD32Async", 3020, cuMemsetD32Async),
	F("cuStreamCreate", 2000, cuStreamCreate),
	F("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
	F("cuStreamGetPriority", 5050, cuStreamGetPriority),
	F("cuStreamDestroy", 2000, cuStreamDestroy),
	F("cuStreamDestroy", 4000, cuStreamDestroy_v2),
	F("cuStreamSynchronize", 2000, cuStreamSynchronize),
	F("cuStreamQuery", 2000, cuStreamQuery),
	F("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
	F("cuEventCreate", 2000, cuEventCreate),
	F("cuEventRecord", 2000, cuEventRecord),
	F("cuEventSynchronize", 2000, cuEventSynchronize),
	F("cuEventQuery", 2000, cuEventQuery),
	F("cuEventElapsedTime", 2000, cuEventElapsedTime),
	F("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
	F("cuEventDestroy", 2000, cuEventDestroy),
	F("cuEventDestroy", 4000, cuEventDestroy_v2),
	F("cuGetExportTable", 3000, cuGetExportTable),
#undef F
};

/* The same function serves the legacy and the per-thread default stream (both are the session's ordered
 * stream), so flags choose nothing. */
CUresult CUDAAPI
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		    CUdriverProcAddressQueryResult *symbolStatus)
{
	const struct drv_proc_row *best = NULL;
	bool named = false;
	if (symbol == NULL || pfn == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(drv_procs) / sizeof(drv_procs[0]); i++) {
		if (strcmp(drv_procs[i].name, symbol) != 0)
			continue;
		named = true;
		if (drv_procs[i].version <= cudaVersion && (best == NULL || drv_procs[i].version > best->version))
			best = &drv_procs[i];
	}
	if (symbolStatus != NULL)
		*symbolStatus = best != NULL ? CU_GET_PROC_ADDRESS_SUCCESS
				: named      ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
					     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *stub = best == NULL && !named ? drv_stub_lookup(symbol) : NULL;
	if (stub != NULL) { /* a call that is refused when made: the program gets NOT_SUPPORTED, never NULL */
		if (symbolStatus != NULL)
			*symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
		*pfn = stub;
		return CUDA_SUCCESS;
	}
	if (best == NULL) {
		if (!named) {
			char call[160];
			snprintf(call, sizeof(call), "%s (asked of cuGetProcAddress)", symbol);
			(void)drv_refuse(call, "cuasyncd's libcuda implements the calls docs/DROPIN.md lists");
		}
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = best->fn;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* The private tables NVIDIA's static runtime reaches the driver through: not offered. */
CUresult CUDAAPI
cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	if (ppExportTable != NULL)
		*ppExportTable = NULL;
	return drv_refuse("cuGetExportTable", "the program links NVIDIA's static CUDA runtime: rebuild it with "
					      "`nvcc -cudart shared` and run it with cuasyncd's libcudart in front");
}
