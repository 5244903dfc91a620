/*
 * options.c — the daemon's configuration (see options.h): the command line, the configuration file under it,
 * and reloading it, all from the options' rows (options-table.h); no code here knows any one option.
 */
#include "config.h"

#include "conffile.h"
#include "cua_log.h"
#include "options-table.h"
#include "options.h"
#include "request.h"
#include "session.h"
#include "tenant.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CUAD_CONF_DEFAULT
#define CUAD_CONF_DEFAULT "/etc/cuasyncd/cuasyncd.conf"
#endif

/* ------------------------------------------------------------------ worker mode (internal) */

/* What a worker or a probe is started with (devlink.c writes these): rows of their own, without help, as they
 * fill struct worker_opts rather than the configuration. */
static struct worker_opts *wopts;

static int
parse_worker_uint(const char *arg, unsigned hi, unsigned *out)
{
	return cfg_parse_uint(arg, 0, hi, out);
}

static int
parse_worker(struct config *c, const struct opt_row *o, const char *arg)
{
	unsigned u = 0;
	int bad = parse_worker_uint(arg, 65535, &u);
	(void)c;
	(void)o;
	wopts->shm_fd = (int)u;
	return bad;
}

static int
parse_worker_device(struct config *c, const struct opt_row *o, const char *arg)
{
	unsigned u = 0;
	int bad = parse_worker_uint(arg, CUA_MAX_DEVICES, &u);
	(void)c;
	(void)o;
	wopts->device = (int)u;
	return bad;
}

static int
parse_worker_gen(struct config *c, const struct opt_row *o, const char *arg)
{
	unsigned u = 0;
	int bad = parse_worker_uint(arg, UINT32_MAX >> 1, &u);
	(void)c;
	(void)o;
	wopts->generation = u;
	return bad;
}

static int
parse_log_level_num(struct config *c, const struct opt_row *o, const char *arg)
{
	unsigned u = 0;
	int bad = cfg_parse_uint(arg, 0, 3, &u);
	(void)c;
	(void)o;
	cua_log_set_level((int)u);
	return bad;
}

/* `cuasyncd --cuda-probe`: prints "ok COUNT" and then each device's UUID on a line of its own, in ordinal order,
 * or "no REASON" (run as a child: CUDA stays out of the front-end). */
static int
parse_cuda_probe(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)c;
	(void)o;
	(void)arg;
#ifdef HAVE_CUDA_H
	cua_err e;
	cua_err_clear(&e);
	int n = 0;
	if (cuda_probe(&n, &e) == 0) {
		printf("ok %d\n", n);
		for (int i = 0; i < n; i++) {
			char uuid[64];
			printf("%s\n", cuda_probe_uuid(i, uuid, sizeof(uuid), &e) == 0 ? uuid : "-");
		}
	} else
		printf("no %s\n", e.detail);
#else
	printf("no this cuasyncd was built without CUDA support (configure --with-cuda)\n");
#endif
	return OPT_EXIT(0);
}

#define INTERNAL(name, fn, arg)                                                                                        \
	{                                                                                                              \
		name, OPT_CUSTOM, OPT_CMDLINE, 0, 0, NULL, 0, 0, NULL, fn, arg, NULL, NULL                             \
	}
static const struct opt_row internal_rows[] = {
	INTERNAL("worker", parse_worker, "FD"),
	INTERNAL("worker-device", parse_worker_device, "N"),
	INTERNAL("worker-generation", parse_worker_gen, "N"),
	INTERNAL("log-level-num", parse_log_level_num, "N"),
	INTERNAL("cuda-probe", parse_cuda_probe, NULL),
};
#undef INTERNAL
#define NINTERNAL (sizeof(internal_rows) / sizeof(internal_rows[0]))
#define MAX_ROWS 128 /* options_count + NINTERNAL, at most (test_options checks the table's size) */

/* The row getopt_long returned as val: 1.. the table's, then the internal ones. */
static const struct opt_row *
row_of(int val)
{
	size_t i = (size_t)val - 1;
	if (val <= 0 || i >= options_count + NINTERNAL)
		return NULL;
	return i < options_count ? &options_table[i] : &internal_rows[i - options_count];
}

/* ------------------------------------------------------------------ the file */

/* The configuration file and what the command line said (the file does not override it). */
static struct {
	const char *path;            /* --config, or the default once it exists; NULL: none */
	bool given[MAX_ROWS];        /* options_table rows set on the command line */
	struct config cmdline;       /* the defaults and the command line alone: what a reload starts from */
	struct conf_strings strings; /* the file's values in effect (the configuration points into them) */
} conf;

static bool
given(const struct opt_row *o)
{
	return conf.given[o - options_table];
}

struct file_ctx {
	struct config *c;
	bool pending; /* the file set session-pending */
};

/* One key of the configuration file into F->c (conffile.h), unless the command line set it. */
static int
file_apply(void *ud, const char *section, const char *key, const char *value, char *why, size_t whylen)
{
	struct file_ctx *F = ud;
	if (strncmp(section, "tenant ", 7) == 0 && section[7] != '\0' && section[7] != ' ')
		return tenant_table_set(F->c->tenants, section + 7, key, value, why, whylen);
	if (strcmp(section, "daemon") != 0) {
		snprintf(why, whylen, "unknown section [%s] (expected [daemon] or [tenant NAME])", section);
		return -1;
	}
	const struct opt_row *o = opt_find(key);
	if (o == NULL || (o->flags & OPT_CMDLINE)) {
		snprintf(why, whylen,
			 "unknown key '%s' (keys are the long options of `cuasyncd --help` without the dashes; "
			 "config and ready-fd only on the command line)",
			 key);
		return -1;
	}
	if (given(o)) /* the command line wins */
		return 0;
	if (o->arg == NULL) { /* a flag: yes or no */
		bool yes = strcmp(value, "yes") == 0, no = strcmp(value, "no") == 0;
		if (!yes && !no) {
			snprintf(why, whylen, "invalid value '%s' for %s (expected yes or no)", value, key);
			return -1;
		}
		return yes ? opt_apply(F->c, o, NULL) : 0;
	}
	if (opt_apply(F->c, o, value) != 0) {
		snprintf(why, whylen, "invalid value '%s' for %s (expected %s; see --help)", value, key, o->arg);
		return -1;
	}
	F->pending |= o->off == offsetof(struct config, session_pending) && o->size > 0;
	return 0;
}

/* The configuration file (--config, else the default when it exists) into c. 0, or -1 with why in err. */
static int
config_file(struct config *c, bool *pending, struct conf_strings *keep, char *err, size_t errlen)
{
	struct file_ctx F = {c, false};
	if ((c->tenants = tenant_table_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (conf.path == NULL && access(CUAD_CONF_DEFAULT, F_OK) == 0)
		conf.path = CUAD_CONF_DEFAULT;
	if (conf.path == NULL)
		return 0;
	int rc = conf_read(conf.path, file_apply, &F, keep, err, errlen);
	*pending = F.pending;
	return rc;
}

void
options_log_config_file(void)
{
	if (conf.path != NULL)
		log_info("configuration file %s read", conf.path);
	else
		log_warn("no configuration file: %s does not exist (--config FILE names another); the defaults and "
			 "the command line apply",
			 CUAD_CONF_DEFAULT);
}

/* The listener schemes the daemon serves, one row each: what --listen accepts and what its error lists. */
static const struct listen_scheme {
	const char *prefix, *example;
} listen_schemes[] = {
	{"ipc://", "ipc:///run/cuasyncd/cuasyncd.sock (local clients)"},
	{"tls+tcp://", "tls+tcp://HOST:PORT (remote clients; with --tls-cert)"},
	{"tcp://", "tcp://HOST:PORT (unencrypted; only with --allow-insecure-tcp)"},
	{"tls+tcp4://", NULL}, /* NNG's IPv4- and IPv6-only forms: accepted, not listed */
	{"tls+tcp6://", NULL},
	{"tcp4://", NULL},
	{"tcp6://", NULL},
};

/* One --listen URL: 0, or -1 with what is wrong and what is accepted in err. A bare path is the usual slip. */
static int
listen_check(const char *url, char *err, size_t errlen)
{
	size_t n = sizeof(listen_schemes) / sizeof(listen_schemes[0]), used;
	for (size_t i = 0; i < n; i++) {
		size_t plen = strlen(listen_schemes[i].prefix);
		if (strncmp(url, listen_schemes[i].prefix, plen) != 0)
			continue;
		if (url[plen] != '\0')
			return 0;
		snprintf(err, errlen, "--listen '%s' names no address (e.g. %s)", url,
			 listen_schemes[i].example ? listen_schemes[i].example : "HOST:PORT");
		return -1;
	}
	const char *sep = strstr(url, "://");
	if (sep == NULL && url[0] == '/')
		used = (size_t)snprintf(err, errlen,
					"--listen '%s' is a path, not a URL: for a local socket say ipc://%s", url,
					url);
	else if (sep == NULL)
		used = (size_t)snprintf(err, errlen, "--listen '%s' is not a URL (scheme://address)", url);
	else
		used = (size_t)snprintf(err, errlen, "--listen '%s': unknown scheme '%.*s://'", url,
					(int)(sep - url < 32 ? sep - url : 32), url);
	for (size_t i = 0; i < n && used < errlen; i++)
		if (listen_schemes[i].example != NULL)
			used += (size_t)snprintf(err + used, errlen - used, "%s %s",
						 i ? "," : "; the daemon listens on", listen_schemes[i].example);
	return -1;
}

/* What one option alone cannot check: 0, or -1 with why in err. */
static int
config_check(const struct config *c, char *err, size_t errlen)
{
	for (int i = 0; i < c->nlisten; i++)
		if (listen_check(c->listen[i], err, errlen) != 0)
			return -1;
	/* a session's pool counts against its streams (streampool.c): a larger pool could never be created */
	if (c->pool_streams > c->session_streams) {
		snprintf(err, errlen,
			 "--pool-streams %u is more than --session-streams %u (which counts a session's pool streams): "
			 "no session could create its pool",
			 c->pool_streams, c->session_streams);
		return -1;
	}
	return 0;
}

/* Whether the command line or the file (pending) set session-pending, which else follows --contexts. */
static bool
pending_given(bool pending)
{
	return pending || given(opt_find("session-pending"));
}

int
options_parse(struct config *c, struct worker_opts *wo, int argc, char **argv)
{
	struct option longopts[MAX_ROWS + 1];
	const struct opt_row *o;
	int ch;
	size_t n = 0;
	wopts = wo;
	for (; (o = row_of((int)n + 1)) != NULL && n < MAX_ROWS; n++)
		longopts[n] =
			(struct option){o->name, o->arg != NULL ? required_argument : no_argument, NULL, (int)n + 1};
	longopts[n] = (struct option){NULL, 0, NULL, 0};
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if ((o = row_of(ch)) == NULL) {
			options_usage(stderr);
			return 2;
		}
		int rc = opt_apply(c, o, optarg);
		if (rc >= OPT_EXIT(0))
			return rc - OPT_EXIT(0);
		if (rc == 0) {
			if ((size_t)(ch - 1) < options_count)
				conf.given[ch - 1] = true;
			continue;
		}
		fprintf(stderr, "cuasyncd: invalid value '%s' for --%s (see --help)\n", optarg ? optarg : "", o->name);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "cuasyncd: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	bool pending = false;
	conf.path = c->config_path;
	if (wo->shm_fd < 0) { /* a worker takes everything from its command line */
		char err[512];
		conf.cmdline = *c;
		if (config_file(c, &pending, &conf.strings, err, sizeof(err)) != 0 ||
		    config_check(c, err, sizeof(err)) != 0) {
			fprintf(stderr, "cuasyncd: %s\n", err);
			return 2;
		}
	}
	config_settle(c, pending_given(pending));
	if (wo->shm_fd < 0)
		tenant_table_log_mem(c->tenants, c);
	return -1;
}

/* Appends name to list, ", "-separated. */
static void
list_add(char *list, size_t len, const char *name)
{
	size_t used = strlen(list);
	snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
}

/* Appends to list the names of the options whose value differs between a and b: those SIGHUP changes at once
 * (reload) or those that wait for the next start. */
static void
list_changed(bool reload, const struct config *a, const struct config *b, char *list, size_t len)
{
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		if (!(o->flags & OPT_RELOAD) == reload || !opt_differ(o, a, b))
			continue;
		list_add(list, len, o->name);
	}
}

/*
 * SIGHUP: reads the configuration file again, from the defaults and the command line (which still wins).
 * Limits change at once: sessions keep what they hold, and what they ask for next is checked against the new
 * limits. Settings that shaped start-up are named in the log and wait for the next start. A file that does
 * not read is refused as a whole: the configuration in effect stays. systemd hears RELOADING=1, then READY=1
 * with the outcome in STATUS=. Main thread.
 */
void
options_reload(struct fe *fe, char *status, size_t len)
{
	char err[512] = "", changed[512] = "", later[512] = "";
	struct config next = conf.cmdline;
	struct conf_strings keep = {NULL, 0};
	bool pending = false;
	int level = cua_log_get_level();
	if (config_file(&next, &pending, &keep, err, sizeof(err)) != 0) {
		tenant_table_free(next.tenants);
		cua_log_set_level(level);
		log_error("SIGHUP: %s; the configuration in effect is kept", err);
		snprintf(status, len, "configuration not reloaded: %s", err);
		goto out;
	}
	if (conf.path == NULL) {
		tenant_table_free(next.tenants);
		log_info("SIGHUP: no configuration file (--config, or %s); nothing changed", CUAD_CONF_DEFAULT);
		snprintf(status, len, "no configuration file");
		goto out;
	}
	config_settle(&next, pending_given(pending));
	if (config_check(&next, err, sizeof(err)) != 0) {
		tenant_table_free(next.tenants);
		log_error("SIGHUP: %s; the configuration in effect is kept", err);
		snprintf(status, len, "configuration not reloaded: %s", err);
		goto out;
	}
	if (tenant_table_wants_session(next.tenants) && request_pool_ensure(fe) != 0) {
		tenant_table_free(next.tenants);
		snprintf(err, sizeof(err), "a tenant asks for isolation = session and no session worker starts");
		log_error("SIGHUP: %s; the configuration in effect is kept", err);
		snprintf(status, len, "configuration not reloaded: %s", err);
		goto out;
	}
	fe_lock(fe);
	list_changed(true, &fe->cfg, &next, changed, sizeof(changed));
	list_changed(false, &fe->cfg, &next, later, sizeof(later));
	for (size_t i = 0; i < options_count; i++) /* the limits: plain numbers, read under fe->lock */
		if (options_table[i].flags & OPT_RELOAD)
			memcpy((char *)&fe->cfg + options_table[i].off, (const char *)&next + options_table[i].off,
			       options_table[i].size);
	struct tenant_table *old = fe->cfg.tenants;
	tenant_table_replay(next.tenants, old); /* tenants made at run time outlive a reload (cmd-tenant.c) */
	tenant_table_carry(next.tenants, old);
	fe->cfg.tenants = next.tenants; /* every session moves to the tenant of its tenant's name, else default */
	struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->tenant != NULL)
		s->tenant = tenant_by_name(next.tenants, s->tenant->name);
	tenant_table_log_mem(fe->cfg.tenants, &fe->cfg);
	fe_unlock(fe);
	tenant_table_free(old);
	fe_lock(fe);
	(void)tenant_table_reap(fe); /* removed runtime tenants whose sessions have ended */
	fe_unlock(fe);
	list_add(changed, sizeof(changed), "tenants");
	log_info("SIGHUP: %s reloaded; changed now: %s", conf.path, changed[0] ? changed : "nothing");
	if (later[0])
		log_warn("SIGHUP: %s changed in %s: takes effect at the next start", later, conf.path);
	snprintf(status, len, "configuration reloaded; changed now: %s%s%s", changed[0] ? changed : "nothing",
		 later[0] ? "; at the next start: " : "", later);
out:
	conf_strings_free(&keep); /* the running configuration points into conf.strings only */
}
