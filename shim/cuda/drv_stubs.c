/*
 * drv_stubs.c — the driver API calls this library does not implement, exported so that a program linked
 * against them loads and gets CUDA_ERROR_NOT_SUPPORTED with one line on stderr naming the call and what to do.
 * A refusal ignores its arguments, so one definition serves every prototype. cuda.h is not included: its
 * prototypes (and macros onto versioned names) would contradict these definitions.
 */
#include "config.h"

#include "drv_stubs.h"

#include <stddef.h>
#include <string.h>

#define FIX_LEGACY                                                                                                     \
	"the pre-CUDA-3.2 ABI with 32-bit device pointers: rebuild against a current cuda.h (it calls the _v2 names)"
#define FIX_UNIFIED "unified and mapped memory are not shared through cuasyncd: use cuMemAlloc and explicit copies"
#define FIX_IPC "IPC and peer access do not cross cuasyncd sessions: share work through one process"
#define FIX_TEX "arrays, textures and surfaces are not offered by cuasyncd: use linear memory (cuMemAlloc)"
#define FIX_COPY "use cuMemcpyHtoD/DtoH/DtoD (and their Async forms) on linear memory"
#define FIX_GRAPH                                                                                                      \
	"stream capture, graphs and host callbacks are not offered by the driver library: synchronize and run the "    \
	"host work after"
#define FIX_LINK "link and JIT through nvcc/nvJitLink ahead of time and load the cubin or fatbin with cuModuleLoadData"
#define FIX_CTX "cuasyncd keeps one context per process: use the default context settings"
#define FIX_MISC "not implemented by cuasyncd's libcuda (docs/DROPIN.md lists what is)"

/* X(exported name, the name cuGetProcAddress is asked for (NULL: a legacy ABI it never gives), fix) */
#define DRV_STUBS(X)                                                                                                   \
	X(cuDeviceTotalMem, NULL, FIX_LEGACY)                                                                          \
	X(cuModuleGetGlobal, NULL, FIX_LEGACY)                                                                         \
	X(cuMemGetInfo, NULL, FIX_LEGACY)                                                                              \
	X(cuMemAlloc, NULL, FIX_LEGACY)                                                                                \
	X(cuMemFree, NULL, FIX_LEGACY)                                                                                 \
	X(cuMemAllocHost, NULL, FIX_LEGACY)                                                                            \
	X(cuMemAllocPitch, NULL, FIX_LEGACY)                                                                           \
	X(cuMemGetAddressRange, NULL, FIX_LEGACY)                                                                      \
	X(cuMemHostGetDevicePointer, NULL, FIX_LEGACY)                                                                 \
	X(cuMemcpyHtoD, NULL, FIX_LEGACY)                                                                              \
	X(cuMemcpyDtoH, NULL, FIX_LEGACY)                                                                              \
	X(cuMemcpyDtoD, NULL, FIX_LEGACY)                                                                              \
	X(cuMemcpyHtoDAsync, NULL, FIX_LEGACY)                                                                         \
	X(cuMemcpyDtoHAsync, NULL, FIX_LEGACY)                                                                         \
	X(cuMemcpyDtoDAsync, NULL, FIX_LEGACY)                                                                         \
	X(cuMemsetD8, NULL, FIX_LEGACY)                                                                                \
	X(cuMemsetD16, NULL, FIX_LEGACY)                                                                               \
	X(cuMemsetD32, NULL, FIX_LEGACY)                                                                               \
	X(cuMemAllocManaged, "cuMemAllocManaged", FIX_UNIFIED)                                                         \
	X(cuMemAllocPitch_v2, "cuMemAllocPitch", FIX_COPY)                                                             \
	X(cuMemAllocAsync, "cuMemAllocAsync", "use cuMemAlloc (stream-ordered allocation is not offered)")             \
	X(cuMemFreeAsync, "cuMemFreeAsync", "use cuMemFree after synchronizing the stream")                            \
	X(cuMemHostRegister_v2, "cuMemHostRegister", "allocate the buffer with cuMemHostAlloc instead")                \
	X(cuMemHostUnregister, "cuMemHostUnregister", "allocate the buffer with cuMemHostAlloc instead")               \
	X(cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer", FIX_UNIFIED)                                      \
	X(cuMemGetAddressRange_v2, "cuMemGetAddressRange", "keep the allocation's size yourself")                      \
	X(cuMemPrefetchAsync, "cuMemPrefetchAsync", FIX_UNIFIED)                                                       \
	X(cuMemAdvise, "cuMemAdvise", FIX_UNIFIED)                                                                     \
	X(cuPointerGetAttribute, "cuPointerGetAttribute", FIX_UNIFIED)                                                 \
	X(cuPointerGetAttributes, "cuPointerGetAttributes", FIX_UNIFIED)                                               \
	X(cuMemcpy, "cuMemcpy", FIX_COPY)                                                                              \
	X(cuMemcpyAsync, "cuMemcpyAsync", FIX_COPY)                                                                    \
	X(cuMemcpy2D_v2, "cuMemcpy2D", FIX_COPY)                                                                       \
	X(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", FIX_COPY)                                                             \
	X(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", FIX_COPY)                                                     \
	X(cuMemcpy3D_v2, "cuMemcpy3D", FIX_COPY)                                                                       \
	X(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", FIX_COPY)                                                             \
	X(cuMemcpyPeer, "cuMemcpyPeer", FIX_IPC)                                                                       \
	X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", FIX_IPC)                                                             \
	X(cuMemsetD2D8_v2, "cuMemsetD2D8", FIX_COPY)                                                                   \
	X(cuMemsetD2D16_v2, "cuMemsetD2D16", FIX_COPY)                                                                 \
	X(cuMemsetD2D32_v2, "cuMemsetD2D32", FIX_COPY)                                                                 \
	X(cuIpcGetMemHandle, "cuIpcGetMemHandle", FIX_IPC)                                                             \
	X(cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", FIX_IPC)                                                        \
	X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", FIX_IPC)                                                         \
	X(cuIpcGetEventHandle, "cuIpcGetEventHandle", FIX_IPC)                                                         \
	X(cuIpcOpenEventHandle, "cuIpcOpenEventHandle", FIX_IPC)                                                       \
	X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", FIX_IPC)                                                     \
	X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", FIX_IPC)                                                     \
	X(cuCtxDisablePeerAccess, "cuCtxDisablePeerAccess", FIX_IPC)                                                   \
	X(cuArrayCreate_v2, "cuArrayCreate", FIX_TEX)                                                                  \
	X(cuArray3DCreate_v2, "cuArray3DCreate", FIX_TEX)                                                              \
	X(cuArrayDestroy, "cuArrayDestroy", FIX_TEX)                                                                   \
	X(cuTexObjectCreate, "cuTexObjectCreate", FIX_TEX)                                                             \
	X(cuTexObjectDestroy, "cuTexObjectDestroy", FIX_TEX)                                                           \
	X(cuSurfObjectCreate, "cuSurfObjectCreate", FIX_TEX)                                                           \
	X(cuSurfObjectDestroy, "cuSurfObjectDestroy", FIX_TEX)                                                         \
	X(cuModuleGetTexRef, "cuModuleGetTexRef", FIX_TEX)                                                             \
	X(cuLinkCreate_v2, "cuLinkCreate", FIX_LINK)                                                                   \
	X(cuLinkAddData_v2, "cuLinkAddData", FIX_LINK)                                                                 \
	X(cuLinkAddFile_v2, "cuLinkAddFile", FIX_LINK)                                                                 \
	X(cuLinkComplete, "cuLinkComplete", FIX_LINK)                                                                  \
	X(cuLinkDestroy, "cuLinkDestroy", FIX_LINK)                                                                    \
	X(cuLibraryLoadData, "cuLibraryLoadData", "load the image with cuModuleLoadData")                              \
	X(cuLibraryLoadFromFile, "cuLibraryLoadFromFile", "load the image with cuModuleLoad")                          \
	X(cuStreamAddCallback, "cuStreamAddCallback", FIX_GRAPH)                                                       \
	X(cuLaunchHostFunc, "cuLaunchHostFunc", FIX_GRAPH)                                                             \
	X(cuStreamBeginCapture_v2, "cuStreamBeginCapture", FIX_GRAPH)                                                  \
	X(cuStreamEndCapture, "cuStreamEndCapture", FIX_GRAPH)                                                         \
	X(cuStreamIsCapturing, "cuStreamIsCapturing", FIX_GRAPH)                                                       \
	X(cuGraphCreate, "cuGraphCreate", FIX_GRAPH)                                                                   \
	X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", FIX_GRAPH)                                       \
	X(cuGraphLaunch, "cuGraphLaunch", FIX_GRAPH)                                                                   \
	X(cuGraphDestroy, "cuGraphDestroy", FIX_GRAPH)                                                                 \
	X(cuCtxGetLimit, "cuCtxGetLimit", FIX_CTX)                                                                     \
	X(cuCtxSetLimit, "cuCtxSetLimit", FIX_CTX)                                                                     \
	X(cuCtxGetFlags, "cuCtxGetFlags", FIX_CTX)                                                                     \
	X(cuCtxGetApiVersion, "cuCtxGetApiVersion", FIX_CTX)                                                           \
	X(cuCtxSetCacheConfig, "cuCtxSetCacheConfig", FIX_CTX)                                                         \
	X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", FIX_CTX)                                              \
	X(cuDevicePrimaryCtxSetFlags_v2, "cuDevicePrimaryCtxSetFlags", FIX_CTX)                                        \
	X(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", FIX_CTX)                                           \
	X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", "cuasyncd does not report PCI addresses: ask nvidia-smi")        \
	X(cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId", "cuasyncd does not report PCI addresses: use cuDeviceGet")   \
	X(cuDeviceGetProperties, "cuDeviceGetProperties", "use cuDeviceGetAttribute")                                  \
	X(cuStreamGetFlags, "cuStreamGetFlags", FIX_MISC)                                                              \
	X(cuStreamGetCtx, "cuStreamGetCtx", FIX_MISC)                                                                  \
	X(cuEventRecordWithFlags, "cuEventRecordWithFlags", "use cuEventRecord")                                       \
	X(cuFuncGetName, "cuFuncGetName", "keep the name given to cuModuleGetFunction")                                \
	X(cuLaunchCooperativeKernelMultiDevice, "cuLaunchCooperativeKernelMultiDevice",                                \
	  "launch on each device with cuLaunchCooperativeKernel")

#define DRV_STUB_DEFINE(name, procname, fix)                                                                           \
	int name(void);                                                                                                \
	int name(void)                                                                                                 \
	{                                                                                                              \
		return drv_refuse_int(#name, fix);                                                                     \
	}
DRV_STUBS(DRV_STUB_DEFINE)

static const struct drv_stub_row {
	const char *procname;
	int (*fn)(void);
} drv_stub_rows[] = {
#define DRV_STUB_ROW(name, procname, fix) {procname, name},
	DRV_STUBS(DRV_STUB_ROW)
#undef DRV_STUB_ROW
};

void *
drv_stub_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(drv_stub_rows) / sizeof(drv_stub_rows[0]); i++)
		if (drv_stub_rows[i].procname != NULL && strcmp(drv_stub_rows[i].procname, name) == 0)
			return (void *)drv_stub_rows[i].fn;
	return NULL;
}
