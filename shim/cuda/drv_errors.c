/*
 * drv_errors.c — CUresult names and strings as CUDA prints them, libcuasync statuses mapped onto CUresults,
 * and the once-per-call refusal of what this library does not implement.
 */
#include "config.h"

#include "cua_idmap.h"
#include "drv.h"
#include "drv_stubs.h"

#include "cua_tsa.h"
#include <stdio.h>
#include <string.h>

/* The codes this library returns or may read from the daemon's messages, with cuGetErrorString's text. */
static const struct drv_error_row {
	CUresult code;
	const char *name, *text;
} drv_errors[] = {
#define E(code, text)                                                                                                  \
	{                                                                                                              \
		code, #code, text                                                                                      \
	}
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
	E(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
	E(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
	E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
	E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
	E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
	E(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed"),
	E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
	E(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
	E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
	E(CUDA_ERROR_ASSERT, "device-side assert triggered"),
	E(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
	E(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
	E(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
	E(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space"),
	E(CUDA_ERROR_INVALID_PC, "invalid program counter"),
	E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	E(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

/* libcuasync status → CUresult; a status the daemon's message qualifies (a device fault, a rejected image)
 * takes the CUDA error that message names, when it names one. */
static const struct drv_status_row {
	int status;
	CUresult result;
} drv_statuses[] = {
	{CUA_OK, CUDA_SUCCESS},
	{CUA_EINTERNAL, CUDA_ERROR_UNKNOWN},
	{CUA_EPROTOCOL, CUDA_ERROR_UNKNOWN},
	{CUA_EVERSION, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH},
	{CUA_EUNKNOWN_OP, CUDA_ERROR_NOT_SUPPORTED},
	{CUA_EBAD_ARGUMENT, CUDA_ERROR_INVALID_VALUE},
	{CUA_ENOT_FOUND, CUDA_ERROR_INVALID_HANDLE},
	{CUA_ECONTEXT_LOST, CUDA_ERROR_LAUNCH_FAILED},
	{CUA_EQUOTA, CUDA_ERROR_OUT_OF_MEMORY},
	{CUA_EPDL_UNSUPPORTED, CUDA_ERROR_NOT_SUPPORTED},
	{CUA_ENOMEM, CUDA_ERROR_OUT_OF_MEMORY},
	{CUA_EDEVICE, CUDA_ERROR_UNKNOWN},
	{CUA_ETOO_LARGE, CUDA_ERROR_INVALID_VALUE},
	{CUA_ETIMEOUT, CUDA_ERROR_DEVICE_UNAVAILABLE},
	{CUA_ETRANSPORT, CUDA_ERROR_DEVICE_UNAVAILABLE},
	{CUA_ECLOSED, CUDA_ERROR_DEVICE_UNAVAILABLE},
	{CUA_ENO_SESSION, CUDA_ERROR_NOT_INITIALIZED},
	{CUA_EBUSY, CUDA_ERROR_NOT_READY},
	{CUA_ENO_DEVICE, CUDA_ERROR_NO_DEVICE},
	{CUA_EUNSUPPORTED, CUDA_ERROR_NOT_SUPPORTED},
	{CUA_EMODULE, CUDA_ERROR_INVALID_IMAGE},
	{CUA_EDEVICE_HUNG, CUDA_ERROR_LAUNCH_TIMEOUT},
	{CUA_ESHUTTING_DOWN, CUDA_ERROR_DEVICE_UNAVAILABLE},
	{CUA_EUNAUTHENTICATED, CUDA_ERROR_NOT_PERMITTED},
	{CUA_EPERMISSION_DENIED, CUDA_ERROR_NOT_PERMITTED},
	{CUA_ESESSION_LOST, CUDA_ERROR_DEVICE_UNAVAILABLE},
};

#define NROWS(a) (sizeof(a) / sizeof((a)[0]))

static const struct drv_error_row *
error_row(CUresult code)
{
	for (size_t i = 0; i < NROWS(drv_errors); i++)
		if (drv_errors[i].code == code)
			return &drv_errors[i];
	return NULL;
}

int
drv_result_by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < NROWS(drv_errors); i++)
		if (strlen(drv_errors[i].name) == len && memcmp(drv_errors[i].name, name, len) == 0)
			return (int)drv_errors[i].code;
	return -1;
}

CUresult
drv_result(int status)
{
	CUresult r = CUDA_ERROR_UNKNOWN;
	for (size_t i = 0; i < NROWS(drv_statuses); i++)
		if (drv_statuses[i].status == status)
			r = drv_statuses[i].result;
	if (status == CUA_EDEVICE || status == CUA_ECONTEXT_LOST || status == CUA_EMODULE) {
		const char *m = strstr(cua_last_error(), "CUDA_ERROR_");
		if (m != NULL) {
			size_t n = strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
			int named = drv_result_by_name(m, n);
			if (named >= 0)
				r = (CUresult)named;
		}
	}
	return r;
}

CUresult CUDAAPI
cuGetErrorName(CUresult error, const char **pStr)
{
	const struct drv_error_row *row = error_row(error);
	if (pStr == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = row != NULL ? row->name : NULL;
	return row != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI
cuGetErrorString(CUresult error, const char **pStr)
{
	const struct drv_error_row *row = error_row(error);
	if (pStr == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = row != NULL ? row->text : NULL;
	return row != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static cua_mutex refused_lock = PTHREAD_MUTEX_INITIALIZER;
static cua_idmap refused CUA_GUARDED_BY(refused_lock); /* FNV-1a hashes of the call names already reported */

CUresult
drv_refuse(const char *call, const char *fix)
{
	uint64_t h = 14695981039346656037ull;
	for (const char *p = call; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	cua_mutex_lock(&refused_lock);
	bool first = cua_idmap_find(&refused, h) == NULL;
	if (first)
		(void)cua_idmap_set(&refused, h, &refused); /* out of memory: it is reported again, no harm */
	cua_mutex_unlock(&refused_lock);
	if (first)
		fprintf(stderr,
			"libcuda (cuasyncd): %s is not supported through cuasyncd (CUDA_ERROR_NOT_SUPPORTED): %s\n",
			call, fix);
	return CUDA_ERROR_NOT_SUPPORTED;
}

int
drv_refuse_int(const char *call, const char *fix)
{
	return (int)drv_refuse(call, fix);
}
