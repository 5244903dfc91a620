/* NNG 1.5.x's stream I/O without the daemon's fix for its transports (nngfix.c): for callers that handle a
 * stopped aio themselves (the metrics listener). */
#ifndef CUAD_NNGFIX_H
#define CUAD_NNGFIX_H

#include <nng/nng.h>

void cuad_stream_recv(nng_stream *s, nng_aio *aio);
void cuad_stream_send(nng_stream *s, nng_aio *aio);

#endif
