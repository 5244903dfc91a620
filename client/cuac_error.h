/*
 * cuac_error.h — the errors layer of libcuasync (error.c): the calling thread's last error. The lowest layer:
 * every client file may call it; it calls no client file. See internal.h for the layer order.
 */
#ifndef CUAC_ERROR_H
#define CUAC_ERROR_H

/* Sets the calling thread's cua_last_error to the formatted text and returns status. Any thread; no lock. */
int cuac_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Empties the calling thread's cua_last_error. Any thread; no lock. */
void cuac_error_clear(void);

#endif
