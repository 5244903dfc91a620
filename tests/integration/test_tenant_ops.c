/*
 * test_tenant_ops.c — tenants at run time (issue 23): TENANT_ADD, TENANT_SET, TENANT_REMOVE and TENANT_LIST on
 * the operator endpoint of the real daemon, through libcuasync and through the built cuasyncctl.
 *
 * - A tenant added at run time for this uid with `mem 8M` holds its sessions to 8 MiB while a second tenant's
 *   client beside it (a one-off token) is served; TENANT_SET raises the limit at once; TENANT_LIST shows both
 *   apart from the file's with their usage; SIGHUP keeps them (a runtime tenant whose name the file now names
 *   too stays the runtime one); TENANT_REMOVE disconnects the tenant's session (SESSION_LOST) and the tenant is
 *   gone once the session was cleaned up.
 * - The same ops from a client socket are refused (PERMISSION_DENIED), and cuasyncctl tenant add|set|remove|list
 *   work end to end, with NOT_FOUND and exit status 1 for a tenant that does not exist.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

/* Writes text to dir/name (whole, by rename) and returns the path. */
static const char *
write_file(const char *name, const char *text)
{
	static char path[128];
	char tmp[160];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, path), 0);
	return path;
}

/* A datagram socket standing in for systemd's $NOTIFY_SOCKET: the reload's end is known, not waited for. */
static int
notify_socket(char *path, size_t len)
{
	snprintf(path, len, "%s/notify", dir);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void
next_notice(int fd, char *msg, size_t len)
{
	struct pollfd p = {fd, POLLIN, 0};
	ck_assert_msg(poll(&p, 1, 30000) == 1, "no notification from the daemon within 30 s");
	ssize_t n = recv(fd, msg, len - 1, 0);
	ck_assert_int_gt(n, 0);
	msg[n] = '\0';
}

/* SIGHUP, and the reload's READY=1 with its STATUS= in status. */
static void
reload(const struct daemon *d, int fd, char *status, size_t len)
{
	char msg[1500];
	ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
	next_notice(fd, msg, sizeof(msg));
	ck_assert_msg(strncmp(msg, "RELOADING=1", 11) == 0, "first notice after SIGHUP: %s", msg);
	next_notice(fd, msg, sizeof(msg));
	ck_assert_msg(strncmp(msg, "READY=1\nSTATUS=", 15) == 0, "second notice after SIGHUP: %s", msg);
	snprintf(status, len, "%s", msg + 15);
}

/* The row of tenant name in a fresh TENANT_LIST (false: none). */
static bool
tenant_row(cua_client *op, const char *name, cua_tenant_info *out)
{
	cua_tenant_info *rows;
	uint32_t n;
	bool found = false;
	CK(cua_tenant_list(op, &rows, &n));
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0) {
			*out = rows[i];
			found = true;
		}
	free(rows);
	return found;
}

static const char *
limit_of(const cua_tenant_info *t, const char *key)
{
	for (uint32_t k = 0; k < t->nlimits; k++)
		if (strcmp(t->limits[k].key, key) == 0)
			return t->limits[k].value;
	return NULL;
}

/* A client of d presenting token (NULL: none). */
static cua_client *
connect_with_token(const struct daemon *d, const char *token)
{
	cua_client *c;
	if (token != NULL)
		setenv("CUASYNC_TOKEN", token, 1);
	int rc = cua_connect(d->url, &c);
	unsetenv("CUASYNC_TOKEN");
	ck_assert_msg(rc == CUA_OK, "connect: %s: %s", cua_strerror_name(rc), cua_last_error());
	return c;
}

START_TEST(runtime_tenant_limits_hold_change_survive_sighup_and_go)
{
	snprintf(dir, sizeof(dir), "/tmp/cuasync-tops.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char npath[128], status[1500], uid[32];
	snprintf(uid, sizeof(uid), "%u", (unsigned)geteuid());
	int nfd = notify_socket(npath, sizeof(npath));
	const char *conf = write_file("c.conf", "[tenant from-file]\nuid = 4242424\nstreams = 3\n");
	const char *args[] = {"--config", conf, NULL};
	struct daemon d;
	setenv("NOTIFY_SOCKET", npath, 1);
	daemon_start(&d, args);
	unsetenv("NOTIFY_SOCKET");
	next_notice(nfd, status, sizeof(status));
	cua_client *op = connect_operator(&d);

	/* job-b first: a session matches the first tenant that takes it, and job-a takes this whole uid */
	char tok[65], tok2[65];
	const char *b_kv[] = {"mem", "64M", "weight", "2", NULL};
	CK(cua_tenant_add(op, "job-b", b_kv, tok, sizeof(tok)));
	ck_assert_uint_eq(strlen(tok), 64);
	const char *a_kv[] = {"uid", uid, "mem", "8M", NULL};
	CK(cua_tenant_add(op, "job-a", a_kv, NULL, 0));
	ck_assert_int_eq(cua_tenant_add(op, "job-a", a_kv, NULL, 0), CUA_EBAD_ARGUMENT); /* a name in use */
	ck_assert_int_eq(cua_tenant_add(op, "job-c", b_kv, tok2, sizeof(tok2)), CUA_OK);
	ck_assert_str_ne(tok, tok2);

	cua_client *a = connect_with_token(&d, NULL), *b = connect_with_token(&d, tok);
	cua_deviceptr p1, p2, pb;
	CK(cua_mem_alloc(a, 0, 6u << 20, &p1));
	int rc = cua_mem_alloc(a, 0, 4u << 20, &p2);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_last_error(), "tenant 'job-a'") != NULL,
		      "4 MiB past job-a's 8 MiB: %s: %s", cua_strerror_name(rc), cua_last_error());
	CK(cua_mem_alloc(b, 0, 16u << 20, &pb)); /* the other tenant's client is served beside it */

	cua_tenant_info row;
	bool gone;
	ck_assert(tenant_row(op, "job-a", &row));
	ck_assert_str_eq(row.source, "runtime");
	ck_assert_uint_eq(row.sessions, 1);
	ck_assert_uint_eq(row.mem_bytes, 6u << 20);
	ck_assert_str_eq(limit_of(&row, "mem"), "8388608");
	ck_assert_ptr_nonnull(strstr(row.rule, uid));
	ck_assert(tenant_row(op, "job-b", &row));
	ck_assert_uint_eq(row.sessions, 1);
	ck_assert_uint_eq(row.mem_bytes, 16u << 20);
	ck_assert_str_eq(limit_of(&row, "weight"), "2");
	ck_assert(tenant_row(op, "from-file", &row));
	ck_assert_str_eq(row.source, "file");
	ck_assert_str_eq(limit_of(&row, "streams"), "3");

	/* set raises it: the same 4 MiB is granted now */
	const char *raise[] = {"mem", "32M", NULL};
	CK(cua_tenant_set(op, "job-a", raise));
	CK(cua_mem_alloc(a, 0, 4u << 20, &p2));
	const char *rule[] = {"uid", "0", NULL};
	ck_assert_int_eq(cua_tenant_set(op, "job-a", rule), CUA_EBAD_ARGUMENT);      /* who belongs is fixed */
	ck_assert_int_eq(cua_tenant_set(op, "from-file", raise), CUA_EBAD_ARGUMENT); /* the file's own */
	ck_assert_int_eq(cua_tenant_set(op, "no-such", raise), CUA_ENOT_FOUND);

	/* SIGHUP keeps them; the file now names job-b too: the runtime one stays (and says so in the log) */
	write_file("c.conf", "[tenant from-file]\nuid = 4242424\nstreams = 3\n[tenant job-b]\nuid = 4242425\n");
	reload(&d, nfd, status, sizeof(status));
	ck_assert_msg(strstr(status, "configuration reloaded") != NULL, "%s", status);
	ck_assert(tenant_row(op, "job-a", &row));
	ck_assert_str_eq(row.source, "runtime");
	ck_assert_str_eq(limit_of(&row, "mem"), "33554432");
	ck_assert_uint_eq(row.sessions, 1);
	ck_assert(tenant_row(op, "job-b", &row));
	ck_assert_str_eq(row.source, "runtime");
	ck_assert_ptr_null(strstr(row.rule, "4242425"));
	ck_assert(file_has(d.log, "the run-time tenant is kept"));
	rc = cua_mem_alloc(a, 0, 32u << 20, &p2); /* still job-a's limit after the reload */
	ck_assert_msg(rc == CUA_EQUOTA, "32 MiB more past job-a's 32 MiB after SIGHUP: %s", cua_strerror_name(rc));
	CK(cua_ping(b)); /* the one-off token's session is still in job-b */

	/* remove disconnects its session: SESSION_LOST, within the second the edge takes to close it */
	CK(cua_tenant_remove(op, "job-a", 0));
	rc = CUA_OK;
	for (long i = 0; i < 10000000 && rc == CUA_OK; i++)
		rc = cua_ping(a);
	ck_assert_msg(rc == CUA_ESESSION_LOST, "ping after TENANT_REMOVE: %s", cua_strerror_name(rc));
	CK(cua_ping(b)); /* the other tenant's client is still served */
	cua_disconnect(a);
	/* gone once its session was cleaned up (the list says removing until then) */
	gone = false;
	for (long i = 0; i < 1000000 && !gone; i++)
		gone = !tenant_row(op, "job-a", &row);
	ck_assert_msg(gone, "job-a is still listed after its session ended");
	ck_assert_int_eq(cua_tenant_remove(op, "job-a", 0), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_tenant_remove(op, "from-file", 0), CUA_EBAD_ARGUMENT);

	/* drain: its session stays and makes nothing new; a new session of it is refused */
	CK(cua_tenant_remove(op, "job-b", 1));
	CK(cua_ping(b));
	rc = cua_mem_alloc(b, 0, 1u << 20, &p2);
	ck_assert_msg(rc == CUA_EQUOTA, "an allocation of a draining tenant: %s", cua_strerror_name(rc));
	CK(cua_mem_free(b, pb));
	ck_assert(tenant_row(op, "job-b", &row));
	ck_assert(row.removing);
	cua_client *late;
	setenv("CUASYNC_TOKEN", tok, 1); /* its one-off token is forgotten */
	rc = cua_connect(d.url, &late);
	unsetenv("CUASYNC_TOKEN");
	ck_assert_msg(rc == CUA_EUNAUTHENTICATED, "HELLO with a removed tenant's token: %s", cua_strerror_name(rc));
	cua_disconnect(b);
	gone = false; /* and the tenant goes with its last session */
	for (long i = 0; i < 1000000 && !gone; i++)
		gone = !tenant_row(op, "job-b", &row);
	ck_assert_msg(gone, "job-b is still listed after its last session ended");
	cua_disconnect(op);
	daemon_stop(&d);
	close(nfd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A client socket gets what DISCONNECT gets there: PERMISSION_DENIED, and nothing changes. */
START_TEST(a_client_socket_cannot_manage_tenants)
{
	struct daemon d;
	daemon_start(&d, NULL);
	cua_client *c = connect_to(&d), *op = connect_operator(&d);
	const char *kv[] = {"uid", "0", "mem", "1M", NULL};
	cua_tenant_info *rows;
	uint32_t n;
	ck_assert_int_eq(cua_tenant_add(c, "sneaky", kv, NULL, 0), CUA_EPERMISSION_DENIED);
	ck_assert_int_eq(cua_tenant_set(c, "default", kv + 2), CUA_EPERMISSION_DENIED);
	ck_assert_int_eq(cua_tenant_remove(c, "default", 0), CUA_EPERMISSION_DENIED);
	ck_assert_int_eq(cua_tenant_list(c, &rows, &n), CUA_EPERMISSION_DENIED);
	CK(cua_tenant_list(op, &rows, &n));
	ck_assert_uint_eq(n, 1); /* default alone */
	ck_assert_str_eq(rows[0].name, "default");
	free(rows);
	CK(cua_ping(c));
	cua_disconnect(c);
	cua_disconnect(op);
	daemon_stop(&d);
}
END_TEST

/* Runs the built cuasyncctl with args (a shell word list) against d's operator endpoint; its stdout into out,
 * its exit status returned; its stderr appended to err. */
static int
ctl(const struct daemon *d, const char *args, char *out, size_t len, char *err, size_t errlen)
{
	char cmd[1024], errpath[300];
	snprintf(errpath, sizeof(errpath), "%s/ctl.err", d->dir);
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url '%s' %s 2>%s", builddir(), d->op_url, args, errpath);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	FILE *e = fopen(errpath, "r");
	size_t k = e ? fread(err, 1, errlen - 1, e) : 0;
	err[k] = '\0';
	if (e)
		fclose(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(cuasyncctl_tenant_commands_end_to_end)
{
	struct daemon d;
	daemon_start(&d, NULL);
	char out[8192], err[2048], args[256];
	ck_assert_int_eq(ctl(&d, "tenant add job-7 --one-off-token --mem 8M --streams 4 --weight 3", out, sizeof(out),
			     err, sizeof(err)),
			 0);
	size_t len = strlen(out);
	ck_assert_msg(len == 65 && out[64] == '\n' && strspn(out, "0123456789abcdef") == 64,
		      "the one-off token alone on stdout: '%s'", out);
	out[64] = '\0';
	cua_client *c;
	setenv("CUASYNC_TOKEN", out, 1);
	CK(cua_connect(d.url, &c));
	unsetenv("CUASYNC_TOKEN");
	cua_deviceptr p;
	ck_assert_int_eq(cua_mem_alloc(c, 0, 9u << 20, &p), CUA_EQUOTA); /* job-7's 8M holds */

	snprintf(args, sizeof(args), "tenant add job-8 --uid %u --mem 50%% --isolation shared", (unsigned)geteuid());
	ck_assert_int_eq(ctl(&d, args, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(ctl(&d, "tenant set job-7 --mem 16M", out, sizeof(out), err, sizeof(err)), 0);
	CK(cua_mem_alloc(c, 0, 9u << 20, &p));
	ck_assert_int_eq(ctl(&d, "--json tenant list", out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_msg(strstr(out, "\"name\":\"job-7\"") != NULL && strstr(out, "\"mem\":\"16777216\"") != NULL &&
			      strstr(out, "\"source\":\"runtime\"") != NULL && strstr(out, "\"mem\":\"50%\"") != NULL &&
			      strstr(out, "\"sessions\":1") != NULL,
		      "%s", out);
	ck_assert_int_eq(ctl(&d, "tenant list", out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_msg(strstr(out, "job-8") != NULL && strstr(out, "runtime") != NULL, "%s", out);

	/* errors: the daemon's name and message on stderr, exit status 1; usage errors 2 */
	ck_assert_int_eq(ctl(&d, "tenant remove no-such-job", out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "NOT_FOUND") != NULL && strstr(err, "no-such-job") != NULL, "%s", err);
	ck_assert_int_eq(ctl(&d, "tenant add bad/../name! --uid 1", out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "BAD_ARGUMENT") != NULL, "%s", err);
	ck_assert_int_eq(ctl(&d, "tenant add job-9 --uid 1 --mem lots", out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "invalid value 'lots' for mem") != NULL, "%s", err);
	ck_assert_int_eq(ctl(&d, "tenant set job-7 --uid 1", out, sizeof(out), err, sizeof(err)), 2);
	ck_assert_int_eq(ctl(&d, "tenant frobnicate job-7", out, sizeof(out), err, sizeof(err)), 2);

	ck_assert_int_eq(ctl(&d, "tenant remove job-7", out, sizeof(out), err, sizeof(err)), 0);
	int rc = CUA_OK;
	for (long i = 0; i < 10000000 && rc == CUA_OK; i++)
		rc = cua_ping(c);
	ck_assert_msg(rc == CUA_ESESSION_LOST, "ping after tenant remove: %s", cua_strerror_name(rc));
	cua_disconnect(c);
	ck_assert_int_eq(ctl(&d, "tenant remove job-8 --drain", out, sizeof(out), err, sizeof(err)), 0);
	daemon_stop(&d);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("tenant_ops");
	TCase *tc = tcase_create("tenant_ops");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, runtime_tenant_limits_hold_change_survive_sighup_and_go);
	tcase_add_test(tc, a_client_socket_cannot_manage_tenants);
	tcase_add_test(tc, cuasyncctl_tenant_commands_end_to_end);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
