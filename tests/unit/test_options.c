/*
 * The options' rows (daemon/options-table.c) against themselves and against the manual (man/cuasyncd.8):
 * - every row --help shows has an `.It Fl -name` entry in the manual, and every entry is such a row;
 * - where a row has a default, its entry says `Default: VALUE` with the same value (the first word after
 *   `Default:`, or the argument of the macro on the next line: `.Cm on`, `.Li 0600`);
 * - every row is well formed: its default parses and is in its range, its field has the size of its type, names
 *   are unique; and the coupled limits (cuad-limits.h) are the ones the rows use.
 */
#include "config.h"

#include "options-table.h"
#include "session.h"

#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUA_TOP_SRCDIR
#define CUA_TOP_SRCDIR "."
#endif

static char *man;   /* man/cuasyncd.8, whole */
static char **line; /* its lines */
static size_t nlines;

static void
read_man(void)
{
	char path[1024];
	if (man != NULL) /* read already (CK_FORK=no runs every test in this process) */
		return;
	snprintf(path, sizeof(path), "%s/man/cuasyncd.8", CUA_TOP_SRCDIR);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	man = calloc(1, 1 << 20);
	ck_assert_ptr_nonnull(man);
	size_t n = fread(man, 1, (1 << 20) - 1, f);
	fclose(f);
	line = calloc(n + 1, sizeof(*line));
	ck_assert_ptr_nonnull(line);
	for (char *p = man; p != NULL && *p; nlines++) {
		line[nlines] = p;
		if ((p = strchr(p, '\n')) != NULL)
			*p++ = '\0';
	}
}

/* The option an `.It Fl -name ...` line describes, in name (empty: the line is no such entry). */
static void
entry_name(const char *l, char *name, size_t len)
{
	size_t n = 0;
	name[0] = '\0';
	if (strncmp(l, ".It Fl -", 8) != 0)
		return;
	for (l += 8; (islower((unsigned char)*l) || isdigit((unsigned char)*l) || *l == '-') && n + 1 < len; l++)
		name[n++] = *l;
	name[n] = '\0';
	if (*l != '\0' && *l != ' ') /* not a whole name */
		name[0] = '\0';
}

/* The line of the manual's entry for --name, or -1. */
static long
entry_of(const char *name)
{
	char n[64];
	for (size_t i = 0; i < nlines; i++) {
		entry_name(line[i], n, sizeof(n));
		if (strcmp(n, name) == 0)
			return (long)i;
	}
	return -1;
}

/* The default the entry starting at line at states, into out ("" when it states none). */
static void
entry_default(long at, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = (size_t)at + 1; i < nlines; i++) {
		const char *l = line[i];
		if (strncmp(l, ".It ", 4) == 0 || strcmp(l, ".El") == 0)
			return;
		if (strncmp(l, "Default:", 8) != 0)
			continue;
		l += 8;
		while (*l == ' ')
			l++;
		if (*l == '\0' && i + 1 < nlines && line[i + 1][0] == '.') { /* ".Cm on :" on the next line */
			l = strchr(line[i + 1], ' ');
			l = l ? l + 1 : "";
		}
		size_t n = strcspn(l, " ");
		while (n > 0 && strchr(".,;:)", l[n - 1]) != NULL)
			n--;
		snprintf(out, len, "%.*s", (int)n, l);
		return;
	}
}

START_TEST(every_option_is_in_the_manual_and_back)
{
	read_man();
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		if (o->help != NULL)
			ck_assert_msg(entry_of(o->name) >= 0, "man/cuasyncd.8 has no `.It Fl -%s` entry", o->name);
	}
	char name[64];
	for (size_t i = 0; i < nlines; i++) {
		entry_name(line[i], name, sizeof(name));
		if (name[0] == '\0')
			continue;
		const struct opt_row *o = opt_find(name);
		ck_assert_msg(o != NULL && o->help != NULL, "man/cuasyncd.8 describes --%s, which is no option", name);
	}
}
END_TEST

START_TEST(the_manual_states_each_default_of_the_table)
{
	read_man();
	char def[128];
	int wrong = 0;
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		long at = entry_of(o->name);
		if (o->help == NULL || at < 0)
			continue;
		entry_default(at, def, sizeof(def));
		if (o->def == NULL || strcmp(def, o->def) == 0)
			continue;
		fprintf(stderr, "--%s: the table's default is %s, man/cuasyncd.8 says %s\n", o->name, o->def,
			def[0] ? def : "none (add `Default: VALUE`)");
		wrong++;
	}
	ck_assert_msg(wrong == 0, "%d defaults differ between options-table.c and man/cuasyncd.8", wrong);
}
END_TEST

START_TEST(rows_are_well_formed)
{
	struct config c;
	config_defaults(&c);                       /* aborts on a default that does not parse */
	ck_assert_uint_le(options_count + 8, 128); /* options.c's MAX_ROWS, with its internal rows */
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(o->name, options_table[j].name) != 0, "--%s twice", o->name);
		struct config d;
		config_defaults(&d);
		if (o->def != NULL)
			ck_assert_msg(opt_apply(&d, o, o->def) == 0, "--%s: default %s", o->name, o->def);
		switch (o->type) {
		case OPT_UINT:
		case OPT_OCTAL: ck_assert_msg(o->size == 4, "--%s: a 4-byte field", o->name); break;
		case OPT_SIZE: ck_assert_msg(o->size == 8, "--%s: an 8-byte field", o->name); break;
		case OPT_STRING:
		case OPT_URL: ck_assert_msg(o->size == sizeof(char *), "--%s: a string field", o->name); break;
		case OPT_FLAG: ck_assert_msg(o->size == sizeof(bool), "--%s: a bool field", o->name); break;
		case OPT_ENUM:
			ck_assert_msg(o->size == sizeof(bool) || o->size == sizeof(int), "--%s: an enum field",
				      o->name);
			ck_assert_ptr_nonnull(o->choices);
			break;
		case OPT_CUSTOM: ck_assert_ptr_nonnull(o->parse); break;
		}
		if (o->type == OPT_UINT || o->type == OPT_SIZE) {
			ck_assert_msg(o->lo <= o->hi, "--%s: range", o->name);
			char lo[32], hi[32];
			snprintf(lo, sizeof(lo), "%llu", (unsigned long long)o->lo);
			snprintf(hi, sizeof(hi), "%llu", (unsigned long long)o->hi);
			ck_assert_msg(opt_apply(&d, o, lo) == 0, "--%s %s", o->name, lo);
			if (o->type == OPT_UINT || !(o->flags & OPT_POW2))
				ck_assert_msg(opt_apply(&d, o, hi) == 0, "--%s %s", o->name, hi);
			if (o->lo > 0) {
				snprintf(lo, sizeof(lo), "%llu", (unsigned long long)o->lo - 1);
				ck_assert_msg(opt_apply(&d, o, lo) != 0, "--%s %s is below its range", o->name, lo);
			}
		}
		if (o->flags & OPT_RELOAD) /* a reload copies the field, or the parser acts at once (log-level) */
			ck_assert_msg(o->size > 0 || o->type == OPT_CUSTOM, "--%s", o->name);
	}
}
END_TEST

/* The limits the rows use are the coupled ones (cuad-limits.h). (The session's pool table is sized by the pool
 * itself: tests/integration/test_pool_streams runs 64 kernels at once on a pool of 64.) */
START_TEST(pool_streams_range_is_the_pool_table)
{
	const struct opt_row *p = opt_find("pool-streams"), *s = opt_find("session-streams");
	struct config c;
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(p->hi, CUAD_POOL_STREAMS_MAX);
	ck_assert_uint_eq(s->hi, CUAD_SESSION_STREAMS_MAX);
	config_defaults(&c);
	ck_assert_uint_eq(c.session_streams, CUAD_SESSION_STREAMS_DEFAULT);
	ck_assert_int_eq(opt_apply(&c, p, "64"), 0);
	ck_assert_uint_eq(c.pool_streams, 64);
	ck_assert_int_ne(opt_apply(&c, p, "65"), 0);
	ck_assert_int_ne(opt_apply(&c, p, "0"), 0);
}
END_TEST

/* Each type parses as before the table: a few values that must pass and fail. */
START_TEST(typed_values)
{
	static const struct {
		const char *name, *arg;
		int ok;
	} cases[] = {
		{"ring", "16M", 1},
		{"ring", "3M", 0},
		{"ring", "32K", 0},
		{"emu-mem", "0", 0},
		{"emu-mem", "2G", 1},
		{"max-message", "65536", 1},
		{"max-message", "1K", 0},
		{"max-message", "257M", 0},
		{"session-mem", "50%", 1},
		{"session-mem", "101%", 0},
		{"session-mem", "4G", 1},
		{"ipc-mode", "0660", 1},
		{"ipc-mode", "1000", 0},
		{"ipc-mode", "9", 0},
		{"isolation", "session", 1},
		{"isolation", "none", 0},
		{"scrub", "off", 1},
		{"scrub", "yes", 0},
		{"backend", "emu", 1},
		{"backend", "gpu", 0},
		{"operator-url", "ipc:///x", 1},
		{"operator-url", "tcp://x", 0},
		{"metrics-listen", "http://127.0.0.1:0", 1},
		{"metrics-listen", "127.0.0.1:0", 0},
		{"emu-devices", "65", 0},
		{"emu-devices", "64", 1},
		{"session-streams", "4001", 0},
		{"ready-fd", "-1", 0},
		{"log-level", "debug", 1},
		{"log-level", "loud", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config c;
		config_defaults(&c);
		const struct opt_row *o = opt_find(cases[i].name);
		ck_assert_ptr_nonnull(o);
		ck_assert_msg((opt_apply(&c, o, cases[i].arg) == 0) == cases[i].ok, "--%s %s", cases[i].name,
			      cases[i].arg);
	}
	struct config c;
	config_defaults(&c);
	ck_assert_int_eq(opt_apply(&c, opt_find("isolation"), "session"), 0);
	ck_assert_int_eq(c.isolation, ISO_SESSION);
	ck_assert_int_eq(opt_apply(&c, opt_find("scrub"), "off"), 0);
	ck_assert(!c.scrub);
	ck_assert_int_eq(opt_apply(&c, opt_find("session-mem"), "50%"), 0);
	ck_assert_uint_eq(c.session_mem_pct, 50);
	ck_assert_uint_eq(c.session_mem, 0);
	config_defaults(&c);
	ck_assert_int_eq(c.ready_fd, -1);
	ck_assert_int_eq(c.ipc_mode, -1);
	ck_assert_int_eq(c.operator_mode, 0600);
	ck_assert(c.scrub);
	ck_assert_uint_eq(c.max_message, (64u << 20) + (1u << 20));
	ck_assert_uint_eq(c.session_mem_pct, 25);
	ck_assert_str_eq(c.backend, "auto");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, every_option_is_in_the_manual_and_back);
	tcase_add_test(tc, the_manual_states_each_default_of_the_table);
	tcase_add_test(tc, rows_are_well_formed);
	tcase_add_test(tc, pool_streams_range_is_the_pool_table);
	tcase_add_test(tc, typed_values);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	free(line);
	free(man);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
