/*
 * unsupported.c — every other export of the CUDA runtime (unsupported.def): it answers cudaErrorNotSupported and
 * says once on stderr what it is and what to do, so a program that reaches one fails cleanly instead of failing
 * to load or crashing. Each is defined without its prototype (this file does not include cuda_runtime_api.h):
 * all of them return cudaError_t, an int, or nothing, and the caller pops its own arguments, so one shape fits
 * all. (cudaCreateChannelDesc, which returns a struct, is implemented in cudart.c for that reason.)
 */
#include "crt.h"

#include <stddef.h>
#include <string.h>

/* Why a family is refused, by a part of its name; the first row that matches wins. */
static const struct {
	const char *part, *why;
} reasons[] = {
	{"Managed", "unified memory"},
	{"Prefetch", "unified memory"},
	{"MemAdvise", "unified memory"},
	{"AttachMem", "unified memory"},
	{"RangeGetAttribute", "unified memory"},
	{"Discard", "unified memory"},
	{"Texture", "textures and surfaces"},
	{"Surface", "textures and surfaces"},
	{"Array", "CUDA arrays (textures and surfaces)"},
	{"ChannelDesc", "CUDA arrays (textures and surfaces)"},
	{"Ipc", "IPC handles: processes share memory through cuasyncd sessions instead"},
	{"Peer", "peer access between devices"},
	{"Capture", "this stream-capture call: capture with cudaStreamBeginCapture/cudaStreamEndCapture"},
	{"Graph", "this CUDA graph call: graphs of kernels, copies, memsets, host functions and empty nodes, built, "
		  "captured, cloned, instantiated and launched, are supported"},
	{"External", "external memory and semaphores"},
	{"GL", "graphics interoperability"},
	{"Graphics", "graphics interoperability"},
	{"VDPAU", "graphics interoperability"},
	{"EGL", "graphics interoperability"},
	{"MemPool", "stream-ordered memory pools"},
	{"MallocAsync", "stream-ordered allocation"},
	{"FreeAsync", "stream-ordered allocation"},
	{"FromPool", "stream-ordered allocation"},
	{"HostGetDevicePointer", "zero-copy host memory mapped into kernels"},
	{"2D", "pitched 2D copies and allocations"},
	{"3D", "3D copies and allocations"},
	{"Pitch", "pitched 2D copies and allocations"},
	{"DriverEntryPoint", "the driver API behind the runtime's back"},
	{"ProcAddress", "the driver API behind the runtime's back"},
	{"ExportTable", "the driver API behind the runtime's back"},
	{"Library", "runtime-loaded libraries (cudaLibrary*)"},
	{"Kernel", "runtime kernel handles (cudaKernel_t) beyond <<<>>> launches"},
	{"Profiler", "the profiler API"},
	{"GreenCtx", "green contexts"},
	{"DevResource", "device resources (green contexts)"},
	{"Ctx", "execution contexts"},
	{"Unified", "unified memory"},
	{"UserObject", "user objects (CUDA graphs)"},
	{"Flush", "GPUDirect RDMA flushes"},
	{"Batch", "batched copies"},
	{"Nvsci", "NvSci interoperability"},
};

static const char *
why_of(const char *name)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (strstr(name, reasons[i].part))
			return reasons[i].why;
	return "not implemented by libcuasync-cudart";
}

/* Each stub's own prototype, so the definitions are not implicit declarations (-Wmissing-prototypes). */
#define X(name) int name(void);
#include "unsupported.def"
#undef X

#define X(name)                                                                                                        \
	__attribute__((visibility("default"))) int name(void)                                                          \
	{                                                                                                              \
		return crt_unsupported(#name, why_of(#name));                                                          \
	}
#include "unsupported.def"
#undef X
