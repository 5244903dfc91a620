/*
 * auth.c — identities and credentials (see auth.h): the listeners' policy at start, the token file, the
 * operators, and the checks of HELLO and of every request before it.
 */
#include "config.h"

#include "auth.h"
#include "cua_log.h"

#include <errno.h>
#include <grp.h>
#include <mbedtls/constant_time.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define AUTH_MIN_TOKEN 16u /* shorter tokens can be guessed: refused at start */

struct auth_token {
	char name[64];
	unsigned char tok[CUA_MAX_TOKEN]; /* zero-padded: every comparison reads all of it */
	uint32_t len;
};

struct auth {
	struct auth_token *tokens;
	unsigned ntokens;
	struct auth_token *rt; /* one-off tokens of tenants made at run time (auth_token_add), under fe->lock */
	unsigned nrt;
	uid_t daemon_uid;
	long operator_gid; /* -1: no --operator-group */
	uid_t *members;    /* the group's members by name (getgrnam at start) */
	unsigned nmembers;
	long socket_gid; /* -1: no --socket-group */
};

/* ------------------------------------------------------------------ start-up */

/* True for listener URLs whose transport neither encrypts nor authenticates (tcp://, ws://). */
static bool
url_insecure(const char *url)
{
	return strncmp(url, "ipc://", 6) != 0 && strncmp(url, "abstract://", 11) != 0 && strncmp(url, "tls+", 4) != 0 &&
	       strncmp(url, "wss", 3) != 0 && strncmp(url, "inproc://", 9) != 0;
}

static int
check_listeners(struct fe *fe)
{
	const struct config *c = &fe->cfg;
	for (int i = 0; i < c->nlisten; i++) {
		if (strncmp(c->listen[i], "tls+", 4) == 0 && c->tls_ca == NULL && c->token_file == NULL)
			log_warn("%s: without --tls-ca or --token-file any client that reaches it is served",
				 c->listen[i]);
		if (!url_insecure(c->listen[i]))
			continue;
		if (!c->allow_insecure_tcp) {
			log_error("refusing to listen on %s: plain tcp:// neither encrypts nor authenticates (anyone "
				  "who "
				  "reaches the port can use the GPUs and read the traffic). Use tls+tcp:// with "
				  "--tls-cert "
				  "(and --tls-ca or --token-file), or say --allow-insecure-tcp on a trusted network",
				  c->listen[i]);
			return -1;
		}
		log_warn("%s: plain tcp:// allowed by --allow-insecure-tcp: unencrypted%s", c->listen[i],
			 c->token_file ? " (tokens travel in clear text)" : " and unauthenticated");
		fe->insecure_listeners++;
	}
	return 0;
}

/* One "name:token" line into t. 0 or -1 (logged). */
static int
parse_token_line(const char *path, unsigned lineno, char *line, struct auth_token *t)
{
	char *colon = strchr(line, ':');
	size_t nlen = colon ? (size_t)(colon - line) : 0, tlen = colon ? strlen(colon + 1) : 0;
	if (colon == NULL || nlen == 0 || nlen >= sizeof(t->name) ||
	    strspn(line, "abcdefghijklmnopqrstuvwxyz"
			 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789._-") != nlen) {
		log_error("--token-file %s: line %u: expected name:token, the name 1..63 letters, digits, '.', "
			  "'_' or '-'",
			  path, lineno);
		return -1;
	}
	if (tlen < AUTH_MIN_TOKEN || tlen > CUA_MAX_TOKEN) {
		log_error("--token-file %s: line %u (%.*s): a token has %u..%u bytes (e.g. `openssl rand -hex 32`)",
			  path, lineno, (int)nlen, line, AUTH_MIN_TOKEN, CUA_MAX_TOKEN);
		return -1;
	}
	memset(t, 0, sizeof(*t));
	memcpy(t->name, line, nlen);
	memcpy(t->tok, colon + 1, tlen);
	t->len = (uint32_t)tlen;
	return 0;
}

/* Reads --token-file into a. 0 or -1 (logged). */
static int
load_tokens(struct auth *a, const char *path)
{
	char line[CUA_MAX_TOKEN + 128];
	unsigned lineno = 0;
	int r = -1;
	struct stat st;
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		log_error("--token-file %s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fileno(f), &st) != 0 || (st.st_mode & (S_IROTH | S_IWOTH))) {
		log_error("--token-file %s: every user of this host may read or change it (mode %04o): "
			  "chmod 0600 (or 0640 with the daemon's group) and start again",
			  path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		struct auth_token *grown = realloc(a->tokens, (a->ntokens + 1) * sizeof(*grown));
		if (grown == NULL)
			goto out;
		a->tokens = grown;
		if (parse_token_line(path, lineno, line, &a->tokens[a->ntokens]) != 0)
			goto out;
		for (unsigned i = 0; i < a->ntokens; i++)
			if (strcmp(a->tokens[i].name, a->tokens[a->ntokens].name) == 0) {
				log_error("--token-file %s: line %u: the name '%s' is used twice", path, lineno,
					  a->tokens[i].name);
				goto out;
			}
		a->ntokens++;
	}
	if (a->ntokens == 0) {
		log_error("--token-file %s: no name:token line", path);
		goto out;
	}
	log_info("--token-file %s: %u token(s); tcp:// and tls+tcp:// sessions must present one in HELLO", path,
		 a->ntokens);
	r = 0;
out:
	explicit_bzero(line, sizeof(line));
	if (f != NULL)
		fclose(f);
	return r;
}

/* --operator-group: its gid and its members' uids. 0 or -1 (logged). */
static int
load_group(struct auth *a, const char *name, bool members, long *gid)
{
	struct group *g = getgrnam(name);
	if (g == NULL) {
		log_error("group '%s' does not exist (create it, e.g. with systemd-sysusers)", name);
		return -1;
	}
	*gid = (long)g->gr_gid;
	for (char **m = g->gr_mem; members && m && *m; m++) {
		struct passwd *pw = getpwnam(*m);
		uid_t *grown = pw ? realloc(a->members, (a->nmembers + 1) * sizeof(*grown)) : NULL;
		if (grown == NULL)
			continue;
		a->members = grown;
		a->members[a->nmembers++] = pw->pw_uid;
	}
	return 0;
}

int
auth_start(struct fe *fe)
{
	struct auth *a = calloc(1, sizeof(*a));
	int r = -1;
	if (a == NULL)
		goto out;
	fe->auth = a;
	a->daemon_uid = geteuid();
	a->operator_gid = a->socket_gid = -1;
	if (check_listeners(fe) != 0 || (fe->cfg.token_file && load_tokens(a, fe->cfg.token_file) != 0))
		goto out;
	if (fe->cfg.operator_group && load_group(a, fe->cfg.operator_group, true, &a->operator_gid) != 0)
		goto out;
	if (fe->cfg.socket_group && load_group(a, fe->cfg.socket_group, false, &a->socket_gid) != 0)
		goto out;
	r = 0;
out:
	return r;
}

void
auth_fini(struct fe *fe)
{
	struct auth *a = fe->auth;
	if (a == NULL)
		return;
	if (a->tokens)
		explicit_bzero(a->tokens, a->ntokens * sizeof(*a->tokens));
	free(a->tokens);
	if (a->rt)
		explicit_bzero(a->rt, a->nrt * sizeof(*a->rt));
	free(a->rt);
	free(a->members);
	free(a);
	fe->auth = NULL;
}

long
auth_socket_gid(const struct fe *fe, bool operator)
{
	return fe->auth == NULL ? -1 : operator? fe->auth->operator_gid : fe->auth->socket_gid;
}

/* ------------------------------------------------------------------ sessions */

static bool
is_operator(const struct auth *a, const struct identity *id)
{
	if (a == NULL)
		return true; /* no policy (the core's unit tests): the endpoint decides */
	if (id->transport != ID_IPC || !id->has_cred)
		return false;
	if (id->uid == 0 || id->uid == a->daemon_uid || (a->operator_gid >= 0 && id->gid == (uint32_t)a->operator_gid))
		return true;
	for (unsigned i = 0; i < a->nmembers; i++)
		if (a->members[i] == id->uid)
			return true;
	return false;
}

void
do_auth_session(struct fe *fe, struct session *s, bool operator_listener)
{
	struct identity *id = &s->ident;
	memset(id, 0, sizeof(*id));
	id->pid = -1;
	if (fe->edge->peer)
		fe->edge->peer(s->pipe, id);
	id->cert_verified = id->cert_verified && fe->cfg.tls_ca != NULL;
	id->authenticated = (id->transport == ID_IPC && id->has_cred) || id->cert_verified;
	id->need_token = fe->auth && fe->auth->ntokens > 0 && id->transport != ID_IPC;
	id->operator_allowed = is_operator(fe->auth, id);
	s->operator= operator_listener && id->operator_allowed;
	s->denied = operator_listener && !id->operator_allowed;
}

/* Compares the token with every entry, each over all CUA_MAX_TOKEN bytes (the token zero-padded like the
 * entries) with mbedTLS's constant-time compare, without stopping at a match or a difference: how long it takes
 * says nothing about the tokens. The matching entry, or NULL. */
static const struct auth_token *
token_match(const struct auth *a, const cua_bytes *token)
{
	unsigned char padded[CUA_MAX_TOKEN] = {0};
	const struct auth_token *found = NULL;
	if (token->len > sizeof(padded)) /* the schema bounds it (str≤CUA_MAX_TOKEN); a longer one matches none */
		return NULL;
	memcpy(padded, token->ptr, token->len);
	for (unsigned k = 0; k < a->ntokens + a->nrt; k++) {
		const struct auth_token *t = k < a->ntokens ? &a->tokens[k] : &a->rt[k - a->ntokens];
		if (((token->len ^ t->len) | (unsigned)mbedtls_ct_memcmp(padded, t->tok, sizeof(padded))) == 0)
			found = t;
	}
	explicit_bzero(padded, sizeof(padded));
	return found;
}

static int
deny(const struct fe *fe, const struct session *s, cua_err *e)
{
	const struct identity *id = &s->ident;
	return cua_err_set(e, CUA_EPERMISSION_DENIED,
			   "this is the operator endpoint; uid %u is not an operator of this daemon (operators: root, "
			   "uid %u which runs it%s%s%s): use the client socket, or ask to be added to --operator-group",
			   id->uid, fe->auth ? (unsigned)fe->auth->daemon_uid : 0u,
			   fe->cfg.operator_group ? ", the members of group '" : "",
			   fe->cfg.operator_group ? fe->cfg.operator_group : "", fe->cfg.operator_group ? "'" : "");
}

int
do_auth_hello(struct fe *fe, struct session *s, const cua_bytes *token, cua_err *e)
{
	if (s->denied)
		return deny(fe, s, e);
	if (token->len == 0 && !s->ident.need_token)
		return 0;
	bool any = fe->auth && (fe->auth->ntokens || fe->auth->nrt);
	const struct auth_token *t = any ? token_match(fe->auth, token) : NULL;
	if (t == NULL && token->len == 0)
		return cua_err_set(e, CUA_EUNAUTHENTICATED,
				   "this listener requires a token: set $CUASYNC_TOKEN (or $CUASYNC_TOKEN_FILE) to one "
				   "of the daemon's --token-file");
	if (t == NULL && !any)
		return cua_err_set(e, CUA_EUNAUTHENTICATED,
				   "HELLO carries a token but this daemon has no --token-file: send none");
	if (t == NULL)
		return cua_err_set(e, CUA_EUNAUTHENTICATED,
				   "the token is not one of the daemon's --token-file: check $CUASYNC_TOKEN or "
				   "$CUASYNC_TOKEN_FILE (the token was not logged)");
	snprintf(s->ident.token_name, sizeof(s->ident.token_name), "%s", t->name);
	s->ident.authenticated = true;
	return 0;
}

int
do_auth_gate(struct fe *fe, const struct session *s, bool authenticates, cua_err *e)
{
	if (s->denied)
		return deny(fe, s, e);
	if (s->ident.need_token && !s->hello && !authenticates)
		return cua_err_set(e, CUA_EUNAUTHENTICATED,
				   "this connection must authenticate first: send HELLO with a token of the daemon's "
				   "--token-file ($CUASYNC_TOKEN)");
	return 0;
}

const char *
auth_describe(const struct session *s, char *buf, size_t len)
{
	const struct identity *id = &s->ident;
	int n = 0;
	switch (id->transport) {
	case ID_IPC:
		if (id->has_cred)
			n = snprintf(buf, len, "ipc uid %u gid %u pid %lld", id->uid, id->gid, (long long)id->pid);
		else
			n = snprintf(buf, len, "ipc (no peer credentials)");
		break;
	case ID_TLS:
		n = snprintf(buf, len, "tls+tcp (%s)",
			     id->cert_verified ? "client certificate verified" : "no client certificate asked");
		break;
	case ID_TCP: n = snprintf(buf, len, "tcp (insecure)"); break;
	default: n = snprintf(buf, len, "unknown transport"); break;
	}
	if (n > 0 && (size_t)n < len && id->token_name[0])
		n += snprintf(buf + n, len - (size_t)n, ", token '%s'", id->token_name);
	if (n > 0 && (size_t)n < len && s->operator)
		snprintf(buf + n, len - (size_t)n, ", operator");
	return buf;
}

int
auth_token_add(struct fe *fe, const char *name, char *tok, size_t toklen, cua_err *e)
{
	struct auth *a = fe->auth;
	unsigned char raw[32];
	if (a == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "no authentication state");
	if (strlen(name) >= sizeof(a->rt[0].name))
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "a tenant with a one-off token has a name of at most %zu bytes",
				   sizeof(a->rt[0].name) - 1);
	if (toklen < 2 * sizeof(raw) + 1 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return cua_err_set(e, CUA_EINTERNAL, "no random bytes for a token");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(tok + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof(raw));
	struct auth_token *grown = realloc(a->rt, (a->nrt + 1) * sizeof(*grown));
	if (grown == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory for a token");
	a->rt = grown;
	struct auth_token *t = &a->rt[a->nrt++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->len = (uint32_t)(2 * sizeof(raw));
	memcpy(t->tok, tok, t->len);
	return 0;
}

void
auth_token_remove(struct fe *fe, const char *name)
{
	struct auth *a = fe->auth;
	for (unsigned k = 0; a != NULL && k < a->nrt; k++)
		if (strcmp(a->rt[k].name, name) == 0) {
			explicit_bzero(&a->rt[k], sizeof(a->rt[k]));
			a->rt[k] = a->rt[--a->nrt];
			return;
		}
}
