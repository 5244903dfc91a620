/*
 * auth.h — who may use the daemon, and as whom (issue 12). What each transport vouches for:
 *
 *   ipc://      the kernel's credentials of the peer (uid, gid, pid: SO_PEERCRED through NNG); who may connect
 *               at all is the socket file's mode and group (--ipc-mode, --socket-group).
 *   tls+tcp://  with --tls-ca, only peers whose certificate chains to that CA complete the handshake.
 *   tcp://      nothing: refused at start unless --allow-insecure-tcp.
 *
 * With --token-file, a session on a tcp:// or tls+tcp:// listener must carry a token of that file in HELLO
 * before anything else is served (UNAUTHENTICATED); on ipc:// a token is optional and, when sent, checked.
 * The operator endpoint (--operator-url) serves only operators: root, the daemon's own uid and the members of
 * --operator-group; anyone else gets PERMISSION_DENIED for every request there.
 *
 * Tokens are compared in constant time and never logged. Everything here runs with fe->lock held except
 * auth_start and auth_fini (main thread, before the edge starts and after it stopped).
 */
#ifndef CUAD_AUTH_H
#define CUAD_AUTH_H

#include "session.h"

/* Start-up: refuses plain tcp:// listeners without --allow-insecure-tcp (warns with it), reads --token-file
 * (refused when every user may read it), resolves --operator-group and --socket-group. Sets fe->auth and
 * fe->insecure_listeners. 0 or -1 (logged, saying what to change). Main thread, before edge_start. */
int auth_start(struct fe *fe);
/* Forgets the tokens (their memory is cleared) and frees fe->auth. Safe after a failed or no auth_start. */
void auth_fini(struct fe *fe);
/* The group an ipc:// socket file gets: --socket-group for the clients' (operator false), --operator-group for
 * the operator's; -1: leave it. Any thread, after auth_start. */
long auth_socket_gid(const struct fe *fe, bool operator);

/* A new session: asks the edge who the peer is (s->ident) and decides what it must show before it is served;
 * operator_listener: it came through the operator endpoint (s->operator when its identity is an operator's,
 * else s->denied). fe->lock held. */
void do_auth_session(struct fe *fe, struct session *s, bool operator_listener) CUA_REQUIRES(cuad_fe_lock);
/* HELLO's credentials. 0 (s->ident.token_name and .authenticated set when a token matched), or
 * UNAUTHENTICATED (a wrong token, or none where one is required) or PERMISSION_DENIED with a message in e
 * that never contains the token. fe->lock held. */
int do_auth_hello(struct fe *fe, struct session *s, const cua_bytes *token, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* Before any request of s is validated (authenticates: its row says it may carry the token, HELLO): 0, or
 * UNAUTHENTICATED / PERMISSION_DENIED with a
 * message saying what to do. fe->lock held. */
int do_auth_gate(struct fe *fe, const struct session *s, bool authenticates, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* "ipc uid 1000 gid 1000 pid 42", "tls+tcp (certificate verified)", "tcp (unauthenticated)", with ", token
 * 'NAME'" and ", operator" when they apply: for log lines. Returns buf. */
const char *auth_describe(const struct session *s, char *buf, size_t len) CUA_REQUIRES(cuad_fe_lock);

/* A one-off token for the tenant made at run time called name (TENANT_ADD): 32 random bytes as 64 hex digits
 * into tok (toklen >= 65), accepted at HELLO from now on as the token named name (tenant rule `token name`),
 * never written anywhere by the daemon. 0, or an error in e. fe->lock held. */
int auth_token_add(struct fe *fe, const char *name, char *tok, size_t toklen, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* Forgets the one-off token named name (the tenant was removed); sessions that used it keep their session. */
void auth_token_remove(struct fe *fe, const char *name) CUA_REQUIRES(cuad_fe_lock);

#endif
