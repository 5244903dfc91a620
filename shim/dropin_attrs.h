/*
 * dropin_attrs.h — device attributes the drop-in libraries answer differently from the device (shared by
 * libcuda.so.1 and libcudart.so.N; CUDA's runtime attribute numbers equal the driver's). The daemon reports what
 * the GPU's driver answers (cua_device_get_attribute); a program asking whether it may use a feature must hear
 * what a cuasyncd session offers: features the drop-ins refuse (mapped host memory, unified memory, memory pools,
 * virtual memory management, IPC and interop handles) read 0, and the compute mode reads default, since the
 * device is shared through the daemon whatever its own mode.
 */
#ifndef CUASYNC_SHIM_DROPIN_ATTRS_H
#define CUASYNC_SHIM_DROPIN_ATTRS_H

#include "cuasync.h"

#include <cuda.h>
#include <stddef.h>

static const int dropin_attr_zero[] = {
	CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
	CU_DEVICE_ATTRIBUTE_COMPUTE_MODE,
	CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
	CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
	CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
	CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
	CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
	CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
	CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
	CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
	CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED,
};

/* 0: *v holds what the session offers for attr (from the daemon, less the features above); else the
 * libcuasync error (CUA_EUNSUPPORTED: the device does not report attr). */
static inline int
dropin_device_attribute(cua_client *c, int dev, int attr, int *v)
{
	for (size_t i = 0; i < sizeof(dropin_attr_zero) / sizeof(dropin_attr_zero[0]); i++)
		if (dropin_attr_zero[i] == attr) {
			*v = 0;
			return 0;
		}
	return cua_device_get_attribute(c, dev, attr, v);
}

#endif
