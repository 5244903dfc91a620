/*
 * crt.h — libcuasync-cudart's internals shared by its files (docs/DROPIN.md says what the library is).
 * Not a public header: the public API is NVIDIA's cuda_runtime_api.h.
 */
#ifndef CUASYNC_CRT_H
#define CUASYNC_CRT_H

/* The library's refusal of a runtime call it does not implement: one line on stderr the first time each name is
 * refused (what it is and what to do instead), then cudaErrorNotSupported (801), also recorded as the calling
 * thread's last error. Any thread. */
int crt_unsupported(const char *name, const char *why);

#endif
