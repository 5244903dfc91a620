/*
 * options-table.h — the daemon's options as rows (options-table.c): one row per option says its name, its
 * type, the field of struct config it sets, its default, its range, whether SIGHUP changes it at once, whether
 * the configuration file has it, and its --help line. getopt's array, the parsing of the command line and of the
 * file, --help, config_defaults and the reload all walk this table; tests/unit/test_options.c checks it against
 * the manual (man/cuasyncd.8).
 *
 * Adding an option: a field in struct config (daemon.h), one row in options-table.c, an `.It Fl -name` entry
 * in man/cuasyncd.8 (with `Default: VALUE` when the row has a default). Nothing else.
 */
#ifndef CUAD_OPTIONS_TABLE_H
#define CUAD_OPTIONS_TABLE_H

#include "daemon.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_type {
	OPT_UINT,   /* a decimal number within lo..hi, into an unsigned or int field */
	OPT_SIZE,   /* bytes ("64M", "1G") within lo..hi, into a uint64_t or size_t field */
	OPT_OCTAL,  /* permissions, 0..0777, into an int field */
	OPT_STRING, /* into a const char * field (pointing into argv or the file's strings); one of choices if any */
	OPT_URL,    /* a string that starts with choices ("ipc://") */
	OPT_ENUM,   /* one of choices ("off|on"): its index into the field (bool or an enum) */
	OPT_FLAG,   /* no value on the command line ("yes"/"no" in the file): sets a bool field */
	OPT_CUSTOM, /* parse does it all (lists, shares, the log level, --help) */
};

/* Row flags. */
#define OPT_RELOAD 0x1u   /* SIGHUP changes it at once (a limit read when a request is checked) */
#define OPT_CMDLINE 0x2u  /* the command line only: the configuration file has no key for it */
#define OPT_POW2 0x4u     /* OPT_SIZE: a power of two */
#define OPT_UNSET_M1 0x8u /* without a default the int field holds -1 (ready-fd: none; ipc-mode: the umask) */

/* What parse returns to stop the daemon now with an exit status (--help, --version). */
#define OPT_EXIT(status) (100 + (status))

struct opt_row {
	const char *name; /* --name; also the configuration file's key unless OPT_CMDLINE */
	enum opt_type type;
	unsigned flags; /* OPT_RELOAD, OPT_CMDLINE, ... */
	size_t off;     /* the field of struct config (with size 0: none) */
	size_t size;
	const char *def; /* the default, written as on the command line and in the manual's `Default:`; NULL: none
			  * (the field is 0, NULL, or -1 with OPT_UNSET_M1) */
	uint64_t lo, hi; /* OPT_UINT, OPT_SIZE: the range */
	const char *choices;
	/* OPT_CUSTOM: parses arg (NULL for an option without a value) into c. Returns 0, -1 (a bad value), or
	 * OPT_EXIT(status) to stop now. */
	int (*parse)(struct config *c, const struct opt_row *o, const char *arg);
	const char *arg;  /* its value in --help ("BYTES"); NULL: it takes none */
	const char *help; /* its --help line, the default appended from def and note */
	const char *note; /* after the default in --help: "; 0: off" gives "(default 5; 0: off)" */
};

extern const struct opt_row options_table[];
extern const size_t options_count;

/* The row named name, or NULL. */
const struct opt_row *opt_find(const char *name);

/* Parses arg (NULL: none given) into c as o says. Returns 0, -1 for a malformed or out-of-range value, or
 * OPT_EXIT(status). Side effects beyond c only for the log level and --help/--version (stdout). */
int opt_apply(struct config *c, const struct opt_row *o, const char *arg);

/* Whether o's field differs between a and b (strings by their text). False for a row without a field. */
int opt_differ(const struct opt_row *o, const struct config *a, const struct config *b);

/* `cuasyncd --help`: every row with help, "  --name ARG" padded to 28 columns, its help and default. */
void options_usage(FILE *f);

#endif
