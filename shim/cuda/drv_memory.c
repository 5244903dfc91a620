/*
 * drv_memory.c — device memory, copies, memsets and host memory. The synchronous calls run on the session's
 * ordered stream, which carries the NULL stream and every blocking stream (drv_stream.c), so they wait for that
 * work as CUDA's legacy default stream does. "Async" copies to and from the host return once done (a valid
 * implementation of CUDA's contract); device-side ones are queued on their stream.
 */
#include "config.h"

#include "drv.h"

#include <stdlib.h>

CUresult CUDAAPI
cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (dptr == NULL || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	cua_deviceptr p;
	int st = cua_mem_alloc(c, dev, bytesize, &p);
	if (st == CUA_OK)
		*dptr = (CUdeviceptr)p;
	return drv_result(st);
}

CUresult CUDAAPI
cuMemFree_v2(CUdeviceptr dptr)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS || dptr == 0)
		return r;
	int st = cua_mem_free(c, dptr);
	return st == CUA_ENOT_FOUND ? CUDA_ERROR_INVALID_VALUE : drv_result(st); /* CUDA: not an allocation */
}

/* free: the device's memory less what every session of the daemon holds there. */
CUresult CUDAAPI
cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	cua_client *c;
	int dev;
	const cua_device_info *info;
	CUresult r = drv_current(&c, &dev);
	if (r == CUDA_SUCCESS)
		r = drv_device_info(dev, &info);
	if (r != CUDA_SUCCESS)
		return r;
	if (free_bytes == NULL || total == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	cua_daemon_status *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int st = cua_status(c, s);
	if (st == CUA_OK) {
		uint64_t used = (uint32_t)dev < s->ndevices ? s->devices[dev].alloc_bytes : 0;
		*total = (size_t)info->total_mem;
		*free_bytes = used < info->total_mem ? (size_t)(info->total_mem - used) : 0;
	}
	free(s);
	return drv_result(st);
}

/* A copy between the host and the device on stream hs: host to device when src_host is given, else device to
 * host into dst_host. It returns once done, also for the Async forms (see the top of the file); the synchronous
 * forms are the NULL stream's. */
static CUresult
host_copy(void *dst_host, const void *src_host, CUdeviceptr dev_ptr, size_t n, CUstream hs)
{
	cua_client *c;
	cua_stream s;
	CUresult r = drv_enter(&c, NULL, hs, &s);
	if (r != CUDA_SUCCESS || n == 0)
		return r;
	if (dst_host == NULL && src_host == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	return drv_result(src_host != NULL ? cua_memcpy_htod_on(c, dev_ptr, src_host, n, s)
					   : cua_memcpy_dtoh_on(c, dst_host, dev_ptr, n, s));
}

CUresult CUDAAPI
cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
	return host_copy(NULL, srcHost, dstDevice, ByteCount, hStream);
}
DRV_ALIAS(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz);

CUresult CUDAAPI
cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return host_copy(NULL, srcHost, dstDevice, ByteCount, NULL);
}
DRV_ALIAS(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds);

CUresult CUDAAPI
cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
	return host_copy(dstHost, NULL, srcDevice, ByteCount, hStream);
}
DRV_ALIAS(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz);

CUresult CUDAAPI
cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return host_copy(dstHost, NULL, srcDevice, ByteCount, NULL);
}
DRV_ALIAS(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds);

/* A device-side operation: count bytes copied from src to dst (width 0), or count elements of width bytes set to
 * value. async: queued on stream hs as a one-item batch, fire and forget (its failure surfaces at the next
 * synchronisation, as an asynchronous CUDA error does). Otherwise (hs is then NULL) one blocking call on the
 * session's ordered stream, the default one, which reports a failure at once. */
static CUresult
device_op(CUdeviceptr dst, CUdeviceptr src, uint32_t value, unsigned width, size_t count, CUstream hs, bool async)
{
	cua_client *c;
	cua_stream s;
	CUresult r = drv_enter(&c, NULL, hs, &s);
	if (r != CUDA_SUCCESS || count == 0)
		return r;
	if (!async)
		return drv_result(width == 0 ? cua_memcpy_dtod(c, dst, src, count)
					     : cua_memset(c, dst, value, width, count));
	cua_batch *b = cua_batch_new(c);
	if (b == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int st = width == 0 ? cua_batch_add_memcpy_dtod(b, dst, src, count, s)
			    : cua_batch_add_memset(b, dst, value, width, count, s);
	if (st != CUA_OK) {
		cua_batch_free(b);
		return drv_result(st);
	}
	drv_submitted();
	return drv_result(cua_batch_submit(b, NULL));
}

CUresult CUDAAPI
cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return device_op(dstDevice, srcDevice, 0, 0, ByteCount, NULL, false);
}
DRV_ALIAS(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds);

CUresult CUDAAPI
cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
	return device_op(dstDevice, srcDevice, 0, 0, ByteCount, hStream, true);
}
DRV_ALIAS(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz);

CUresult CUDAAPI
cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return device_op(dstDevice, 0, uc, 1, N, NULL, false);
}
DRV_ALIAS(cuMemsetD8_v2, cuMemsetD8_v2_ptds);

CUresult CUDAAPI
cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return device_op(dstDevice, 0, us, 2, N, NULL, false);
}
DRV_ALIAS(cuMemsetD16_v2, cuMemsetD16_v2_ptds);

CUresult CUDAAPI
cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return device_op(dstDevice, 0, ui, 4, N, NULL, false);
}
DRV_ALIAS(cuMemsetD32_v2, cuMemsetD32_v2_ptds);

CUresult CUDAAPI
cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return device_op(dstDevice, 0, uc, 1, N, hStream, true);
}
DRV_ALIAS(cuMemsetD8Async, cuMemsetD8Async_ptsz);

CUresult CUDAAPI
cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	return device_op(dstDevice, 0, us, 2, N, hStream, true);
}
DRV_ALIAS(cuMemsetD16Async, cuMemsetD16Async_ptsz);

CUresult CUDAAPI
cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	return device_op(dstDevice, 0, ui, 4, N, hStream, true);
}
DRV_ALIAS(cuMemsetD32Async, cuMemsetD32Async_ptsz);

/* Host memory the daemon's worker maps too (cua_host_alloc; ipc:// connections on the daemon's host). Mapping it
 * into the device's address space (CU_MEMHOSTALLOC_DEVICEMAP) is not offered. */
CUresult CUDAAPI
cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (pp == NULL || bytesize == 0 ||
	    (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	if (Flags & CU_MEMHOSTALLOC_DEVICEMAP)
		return drv_refuse("cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP)",
				  "kernels cannot read host memory through cuasyncd: allocate without DEVICEMAP and "
				  "copy with cuMemcpyHtoD");
	return drv_result(cua_host_alloc(c, dev, bytesize, pp));
}

CUresult CUDAAPI
cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult CUDAAPI
cuMemFreeHost(void *p)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	int st = cua_host_free(c, p);
	return st == CUA_ENOT_FOUND || st == CUA_EBAD_ARGUMENT ? CUDA_ERROR_INVALID_VALUE : drv_result(st);
}
