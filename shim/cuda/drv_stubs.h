/*
 * drv_stubs.h — the refusals of libcuasync-cuda, without cuda.h (drv_stubs.c defines exported names whose
 * prototypes cuda.h would contradict).
 */
#ifndef CUA_DRV_STUBS_H
#define CUA_DRV_STUBS_H

/* drv_refuse (drv_errors.c) as an int: CUDA_ERROR_NOT_SUPPORTED, one stderr line per call name. */
int drv_refuse_int(const char *call, const char *fix);
/* The refusing entry point cuGetProcAddress hands out for name (a CUDA call this library does not implement),
 * or NULL. */
void *drv_stub_lookup(const char *name);

#endif
