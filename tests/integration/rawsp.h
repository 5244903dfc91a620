/*
 * rawsp.h — a raw SP (req0) peer over a plain socket, for tests that must misbehave as libcuasync never would:
 * send requests and close without reading, or open a connection and never finish a handshake. Requests are
 * encoded with the wire codec (common/cua_wire.h). Every wait is bounded; a failure to connect fails the test.
 */
#ifndef CUA_RAWSP_H
#define CUA_RAWSP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct raw {
	int fd;
	uint32_t next_id;
};

/* Connects to url (ipc://PATH or tcp://HOST:PORT, numeric IPv4) and completes the 8-byte SP handshake. */
void raw_connect(struct raw *r, const char *url);
/* Opens a TCP connection to 127.0.0.1:port and sends nothing: a peer that never starts (TLS) or never finishes
 * (SP) a handshake. The descriptor, or -1 when connect failed (errno set). */
int raw_tcp_open(int port);
/* Writes one request frame (op, seq, body as cua_wire_pack_request takes it). 0, or -1 when the socket did not
 * take it within timeout_ms or failed. */
int raw_write(struct raw *r, uint32_t op, uint64_t seq, const void *body, int timeout_ms);
/* Reads one reply: its status (the message in msg), or -1 (nothing within timeout_ms, or the peer closed). */
int raw_read(struct raw *r, int timeout_ms, char *msg, size_t msglen);
/* true when the daemon closed fd within timeout_ms. Reads nothing. */
bool raw_fd_closed(int fd, int timeout_ms);
void raw_close(struct raw *r);

/* How many descriptors process pid has open (/proc/PID/fd), or -1. */
int proc_fd_count(int pid);

#endif
