/*
 * The golden vectors, their table and PROTOCOL.md hold the same protocol:
 *   (a) every .hex file of proto/vectors/ is exactly what tools/vectors.c's row encodes to (and no file lacks a row);
 *   (b) every vector decodes with the codec and re-encodes to the same bytes;
 *   (c) PROTOCOL.md §4's request table names every op as cua_op_name() does and lists, for each request and
 *       reply body, the codec's fields (count, names, types, stated limits); files it names exist.
 * A failure names the file or the table row and says what differs; `make vectors` rewrites the vectors.
 */
#include "config.h"

#include "cua_wire.h"
#include "vectors.h"

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ files */

static const char *
srcdir(void)
{
	const char *src = getenv("CUA_TEST_SRCDIR"); /* a build carried to another machine */
	return src && *src ? src : CUA_SRCDIR;
}

/* The whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
static char *
slurp(const char *rel)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", srcdir(), rel);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 65536, n = 0, got;
	char *buf = malloc(cap + 1);
	while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *b = realloc(buf, (cap *= 2) + 1);
			if (b == NULL)
				free(buf);
			buf = b;
		}
	}
	fclose(f);
	if (buf != NULL)
		buf[n] = '\0';
	return buf;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The bytes of a .hex text ('#' lines ignored) into out (malloc'd); returns the count. */
static size_t
hex_bytes(const char *text, unsigned char **out)
{
	size_t n = 0;
	int hi = -1, comment = 0;
	*out = malloc(strlen(text) / 2 + 1);
	for (const char *p = text; *p; p++) {
		if (*p == '#')
			comment = 1;
		if (*p == '\n')
			comment = 0;
		if (comment || hexval(*p) < 0)
			continue;
		if (hi < 0) {
			hi = hexval(*p);
			continue;
		}
		(*out)[n++] = (unsigned char)(hi << 4 | hexval(*p));
		hi = -1;
	}
	return n;
}

static char *
vector_file(const struct vec_row *r)
{
	char rel[512];
	snprintf(rel, sizeof(rel), "proto/vectors/%s.hex", r->file);
	return slurp(rel);
}

/* ------------------------------------------------------------------ (a) files = table */

START_TEST(vector_file_is_what_its_row_encodes_to)
{
	const struct vec_row *r = &vec_rows[_i];
	char *want = vec_text(r);
	ck_assert_msg(want != NULL, "%s: the codec cannot encode the row of tools/vectors.c", r->file);
	char *have = vector_file(r);
	ck_assert_msg(have != NULL, "proto/vectors/%s.hex is missing: run `make vectors`", r->file);
	ck_assert_msg(strcmp(have, want) == 0,
		      "proto/vectors/%s.hex differs from its row in tools/vectors.c: run `make vectors` and review the "
		      "diff\n--- the row encodes to:\n%s--- the file holds:\n%s",
		      r->file, want, have);
	free(want);
	free(have);
}
END_TEST

START_TEST(every_vector_file_has_a_row)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/proto/vectors", srcdir());
	DIR *d = opendir(dir);
	ck_assert_msg(d != NULL, "cannot open %s", dir);
	struct dirent *e;
	int nfiles = 0;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (n < 5 || strcmp(e->d_name + n - 4, ".hex") != 0)
			continue;
		nfiles++;
		size_t i = 0;
		while (i < vec_nrows &&
		       !(strlen(vec_rows[i].file) == n - 4 && strncmp(vec_rows[i].file, e->d_name, n - 4) == 0))
			i++;
		ck_assert_msg(i < vec_nrows, "proto/vectors/%s has no row in tools/vectors.c (run `make vectors`)",
			      e->d_name);
	}
	closedir(d);
	ck_assert_int_eq(nfiles, (int)vec_nrows);
}
END_TEST

/* ------------------------------------------------------------------ (b) files decode and re-encode */

/* Decodes the vector's bytes as r's kind, checks the header against r, re-encodes what was decoded. */
static void
roundtrip(const struct vec_row *r, const unsigned char *buf, size_t len, cua_wbuf *again)
{
	cua_err err = {0};
	if (r->is_reply) {
		cua_wire_reply rep;
		int rc = cua_wire_decode_reply(buf, len, &rep, &err);
		ck_assert_msg(rc == 0, "%s: %s: %s", r->file, cua_strerror_name(rc), err.detail);
		ck_assert_uint_eq(rep.op, r->op);
		ck_assert_uint_eq(rep.status, r->status);
		char *msg = strndup(rep.message.ptr, rep.message.len);
		ck_assert_int_eq(cua_wire_pack_reply(cua_wbuf_out(again), rep.op, rep.status, msg, &rep.body), 0);
		free(msg);
		cua_wire_reply_free(&rep);
	} else {
		cua_wire_request req;
		int rc = cua_wire_decode_request(buf, len, &req, &err);
		ck_assert_msg(rc == 0, "%s: %s: %s", r->file, cua_strerror_name(rc), err.detail);
		ck_assert_uint_eq(req.op, r->op);
		ck_assert_uint_eq(req.seq, r->seq);
		ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(again), req.op, req.seq, &req.body), 0);
		cua_wire_request_free(&req);
	}
}

START_TEST(vector_decodes_and_reencodes_exactly)
{
	const struct vec_row *r = &vec_rows[_i];
	char *text = vector_file(r);
	ck_assert_msg(text != NULL, "proto/vectors/%s.hex is missing", r->file);
	unsigned char *vec;
	size_t len = hex_bytes(text, &vec);
	cua_wbuf again = {0};
	roundtrip(r, vec, len, &again);
	ck_assert_msg(again.len == len && memcmp(again.data, vec, len) == 0, "%s: re-encoded to other bytes", r->file);
	cua_wbuf_free(&again);
	free(vec);
	free(text);
}
END_TEST

/* The examples read as one session: HELLO has seq 0; the ordered requests have seq 1, 2, … without a gap;
 * every op has a request and a success reply vector. */
START_TEST(vectors_form_one_session_covering_every_op)
{
	uint64_t maxseq = 0, nordered = 0;
	int req_of[CUA_OP_MAX] = {0}, rep_of[CUA_OP_MAX] = {0};
	for (size_t i = 0; i < vec_nrows; i++) {
		const struct vec_row *r = &vec_rows[i];
		if (r->op > 0 && r->op < CUA_OP_MAX && r->status == CUA_OK)
			(r->is_reply ? rep_of : req_of)[r->op]++;
		if (r->is_reply)
			continue;
		if (r->op == CUA_OP_HELLO)
			ck_assert_msg(r->seq == 0, "%s: HELLO is unordered, seq 0", r->file);
		if (r->seq != 0) {
			nordered++;
			ck_assert_msg(r->seq == nordered, "%s: seq %llu, the next ordered request has %llu", r->file,
				      (unsigned long long)r->seq, (unsigned long long)nordered);
			maxseq = r->seq;
		}
	}
	ck_assert_uint_eq(maxseq, nordered);
	for (uint32_t op = 1; op < CUA_OP_MAX; op++)
		ck_assert_msg(cua_op_name(op) == NULL || (req_of[op] >= 1 && rep_of[op] >= 1),
			      "op %u (%s): %d request and %d reply vectors", op, cua_op_name(op), req_of[op],
			      rep_of[op]);
}
END_TEST

static const struct vec_row *
row(const char *file)
{
	for (size_t i = 0; i < vec_nrows; i++)
		if (strcmp(vec_rows[i].file, file) == 0)
			return &vec_rows[i];
	ck_abort_msg("no row %s", file);
	return NULL;
}

/* The BATCH reply answers the BATCH request: one result per item, data exactly for the DTOH items. */
START_TEST(batch_reply_answers_the_batch_request)
{
	const struct cua_req_batch *q = row("req_batch")->body;
	const struct cua_rep_batch *p = row("rep_batch")->body;
	ck_assert_uint_eq(p->nresults, q->nitems);
	for (uint32_t i = 0; i < q->nitems; i++) {
		int dtoh = q->items[i].kind == CUA_OP_MEMCPY_DTOH;
		ck_assert_msg(dtoh ? p->results[i].data.len == q->items[i].u.dtoh.bytes : p->results[i].data.len == 0,
			      "result %u: %u bytes of data for an item of kind %u", i, p->results[i].data.len,
			      q->items[i].kind);
	}
}
END_TEST

/* ------------------------------------------------------------------ (c) PROTOCOL.md against the codec */

#define MAX_SPEC_FIELDS 16

/* One field of a body as PROTOCOL.md writes it: `name: type≤limit`. */
struct spec_field {
	char name[64];
	char type[16];   /* mapped to the codec's type names */
	long long limit; /* -1: none stated */
};

struct spec_row {
	uint32_t op;
	char name[64];
	char cell[2][2048]; /* request body, reply body */
};

#define MAX_SPEC_ROWS 64
static struct spec_row spec_rows[MAX_SPEC_ROWS];
static int spec_nrows = -1; /* -1: not parsed; parse errors fail the tests through spec_error */
static char spec_error[512];
static char *spec_text;

static char *
trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Copies s without markdown emphasis or code marks (`, *) and trimmed. */
static void
plain(char *dst, size_t size, const char *s)
{
	size_t n = 0;
	for (; *s && n + 1 < size; s++)
		if (*s != '`' && *s != '*')
			dst[n++] = *s;
	dst[n] = '\0';
	memmove(dst, trim(dst), strlen(trim(dst)) + 1);
}

/* Splits a markdown table line into at most max cells (the leading and trailing '|' dropped). */
static int
split_cells(char *line, char **cells, int max)
{
	char *p = strchr(line, '|');
	int n = 0;
	if (p == NULL)
		return 0;
	p++;
	while (n < max) {
		char *bar = strchr(p, '|');
		if (bar == NULL)
			break;
		*bar = '\0';
		cells[n++] = trim(p);
		p = bar + 1;
	}
	return n;
}

/* Column indices of §4's table: op, name, request body, reply body; -1 when a header lacks one. */
static int
header_columns(char **cells, int n, int col[4])
{
	static const char *const want[4] = {"op", "name", "request body", "reply body"};
	for (int k = 0; k < 4; k++) {
		col[k] = -1;
		for (int i = 0; i < n; i++) {
			char c[64];
			plain(c, sizeof(c), cells[i]);
			for (char *p = c; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			if (strcmp(c, want[k]) == 0)
				col[k] = i;
		}
		if (col[k] < 0)
			return -1;
	}
	return 0;
}

static int
is_separator(char **cells, int n)
{
	for (int i = 0; i < n; i++)
		if (strspn(cells[i], "-: ") != strlen(cells[i]) || strlen(cells[i]) == 0)
			return 0;
	return n > 0;
}

/* Fills spec_rows from the table lines that follow a header with the four columns. */
static void
parse_table_row(char **cells, int n, const int col[4], int lineno)
{
	char op[32];
	if (n <= col[3]) {
		snprintf(spec_error, sizeof(spec_error), "PROTOCOL.md line %d: %d cells, the table has 4", lineno, n);
		return;
	}
	plain(op, sizeof(op), cells[col[0]]);
	if (op[0] == '\0' || strspn(op, "0123456789") != strlen(op) || spec_nrows >= MAX_SPEC_ROWS) {
		snprintf(spec_error, sizeof(spec_error), "PROTOCOL.md line %d: op '%s' is not a number", lineno, op);
		return;
	}
	struct spec_row *r = &spec_rows[spec_nrows++];
	r->op = (uint32_t)strtoul(op, NULL, 10);
	plain(r->name, sizeof(r->name), cells[col[1]]);
	snprintf(r->cell[0], sizeof(r->cell[0]), "%s", cells[col[2]]);
	snprintf(r->cell[1], sizeof(r->cell[1]), "%s", cells[col[3]]);
}

static void
parse_spec(void)
{
	if (spec_nrows >= 0)
		return;
	spec_nrows = 0;
	spec_text = slurp("proto/PROTOCOL.md");
	if (spec_text == NULL) {
		snprintf(spec_error, sizeof(spec_error), "cannot read %s/proto/PROTOCOL.md", srcdir());
		return;
	}
	char *copy = strdup(spec_text), *next;
	int col[4], in_table = 0, lineno = 0;
	for (char *line = copy; line != NULL; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		lineno++;
		char *cells[16];
		int is_table = trim(line)[0] == '|';
		int n = is_table ? split_cells(line, cells, 16) : 0;
		if (!is_table) {
			if (in_table)
				break; /* the end of §4's table */
			continue;
		}
		if (!in_table) {
			in_table = header_columns(cells, n, col) == 0;
			continue;
		}
		if (!is_separator(cells, n))
			parse_table_row(cells, n, col, lineno);
	}
	free(copy);
	if (spec_nrows == 0 && spec_error[0] == '\0')
		snprintf(spec_error, sizeof(spec_error),
			 "PROTOCOL.md has no table with the columns op | name | request body | reply body");
}

/* Copies the inside of the bracketed list that starts at open ('[') into out; returns the character after
 * its ']' or NULL when it does not close. */
static const char *
bracket_inner(const char *open, char *out, size_t size)
{
	int depth = 0;
	for (const char *p = open; *p; p++) {
		depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
		if (depth == 0) {
			size_t n = (size_t)(p - open - 1) < size - 1 ? (size_t)(p - open - 1) : size - 1;
			memcpy(out, open + 1, n);
			out[n] = '\0';
			return p + 1;
		}
	}
	return NULL;
}

/* The field list of a body: the first [...] of its cell, or, when the cell has none (STATUS's "see below"),
 * the first [...] after "NAME** reply body" (or request body) in the text. 0, or -1 when there is none. */
static int
body_list(const struct spec_row *r, int reply, char *out, size_t size)
{
	const char *open = strchr(r->cell[reply], '[');
	if (open == NULL) {
		char key[128];
		snprintf(key, sizeof(key), "%s** %s body", r->name, reply ? "reply" : "request");
		const char *at = strstr(spec_text, key);
		open = at ? strchr(at, '[') : NULL;
	}
	return open != NULL && bracket_inner(open, out, size) != NULL ? 0 : -1;
}

/* The codec's type name for a PROTOCOL.md type ("u32 (0)", "handle", "str≤128", "[arg …]≤1024", "counts"),
 * and its stated limit (≤N) or -1. */
static void
map_type(const char *t, struct spec_field *f)
{
	static const char *const prim[][2] = {{"u32", "u32"}, {"u64", "u64"}, {"handle", "u64"}, {"i32", "i32"},
					      {"str", "str"}, {"bin", "bin"}, {"dim3", "dim3"},  {"bool", "bool"}};
	char inner[1024];
	const char *rest = t;
	f->limit = -1;
	if (*t == '[') {
		snprintf(f->type, sizeof(f->type), "array");
		rest = bracket_inner(t, inner, sizeof(inner));
		rest = rest ? rest : "";
	} else {
		size_t n = strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789_");
		snprintf(f->type, sizeof(f->type), "struct"); /* a named compound (counts, device_info) */
		for (size_t i = 0; i < sizeof(prim) / sizeof(prim[0]); i++)
			if (strlen(prim[i][0]) == n && strncmp(t, prim[i][0], n) == 0)
				snprintf(f->type, sizeof(f->type), "%s", prim[i][1]);
		rest = t + n;
	}
	if (strncmp(rest, "\xe2\x89\xa4", 3) == 0 || strncmp(rest, "<=", 2) == 0)
		f->limit = strtoll(rest + (rest[0] == '<' ? 2 : 3), NULL, 10);
}

/* Splits "a: u32, b: [x …]≤4, c: str" at its top-level commas into fields. Returns the count or -1 with
 * a reason in why. */
static int
split_fields(char *list, struct spec_field *fields, int max, char *why, size_t whysize)
{
	char *p = trim(list);
	int n = 0;
	while (*p) {
		char *e = p;
		for (int depth = 0; *e && !(depth == 0 && *e == ','); e++)
			depth += *e == '[' || *e == '(' ? 1 : *e == ']' || *e == ')' ? -1 : 0;
		int last = *e == '\0';
		*e = '\0';
		char *colon = strchr(p, ':');
		if (colon == NULL || n == max) {
			snprintf(why, whysize, "'%s' is not 'name: type'", trim(p));
			return -1;
		}
		*colon = '\0';
		snprintf(fields[n].name, sizeof(fields[n].name), "%s", trim(p));
		map_type(trim(colon + 1), &fields[n]);
		n++;
		p = last ? e : trim(e + 1);
	}
	return n;
}

/* Appends to diff what differs between one body of row r and the codec's schema of it. */
static void
compare_body(const struct spec_row *r, int reply, char *diff, size_t size)
{
	const char *what = reply ? "reply body" : "request body";
	char list[2048], why[256] = "";
	struct spec_field sf[MAX_SPEC_FIELDS];
	cua_wire_field_info cf[MAX_SPEC_FIELDS];
	size_t used = strlen(diff);
	int ns = body_list(r, reply, list, sizeof(list)) == 0
			 ? split_fields(list, sf, MAX_SPEC_FIELDS, why, sizeof(why))
			 : -1;
	int nc = cua_wire_schema_fields(r->op, reply, cf, MAX_SPEC_FIELDS);
	if (ns < 0) {
		snprintf(diff + used, size - used, "\n  %s: no field list in PROTOCOL.md (%s)", what,
			 why[0] ? why : "no [...] in the cell, nor after '**NAME** reply body'");
		return;
	}
	if (ns != nc) {
		used += (size_t)snprintf(diff + used, size - used, "\n  %s: PROTOCOL.md has %d fields (", what, ns);
		for (int i = 0; i < ns && used < size; i++)
			used += (size_t)snprintf(diff + used, size - used, "%s%s", i ? ", " : "", sf[i].name);
		used += (size_t)snprintf(diff + used, size - used, "), the codec %d (", nc);
		for (int i = 0; i < nc && i < MAX_SPEC_FIELDS && used < size; i++)
			used += (size_t)snprintf(diff + used, size - used, "%s%s", i ? ", " : "", cf[i].name);
		snprintf(diff + used, size - used, ")");
		return;
	}
	for (int i = 0; i < ns && used < size; i++) {
		int limit_differs = sf[i].limit >= 0 && (unsigned long long)sf[i].limit != cf[i].max &&
				    strcmp(cf[i].type, "u32") != 0 && strcmp(cf[i].type, "u64") != 0;
		if (strcmp(sf[i].name, cf[i].name) == 0 && strcmp(sf[i].type, cf[i].type) == 0 && !limit_differs)
			continue;
		used += (size_t)
			snprintf(diff + used, size - used,
				 "\n  %s field %d: PROTOCOL.md '%s: %s' limit %lld, the codec '%s: %s' limit %llu",
				 what, i + 1, sf[i].name, sf[i].type, sf[i].limit, cf[i].name, cf[i].type,
				 (unsigned long long)cf[i].max);
	}
}

static const struct spec_row *
spec_row_of(uint32_t op)
{
	for (int i = 0; i < spec_nrows; i++)
		if (spec_rows[i].op == op)
			return &spec_rows[i];
	return NULL;
}

/* One case per op (the loop index is the op): the row of §4 against the codec, every difference listed. */
START_TEST(spec_row_matches_codec)
{
	parse_spec();
	ck_assert_msg(spec_error[0] == '\0', "%s", spec_error);
	uint32_t op = (uint32_t)_i;
	const struct spec_row *r = spec_row_of(op);
	if (cua_op_name(op) == NULL) { /* a number no op has: no row either */
		ck_assert_msg(r == NULL, "PROTOCOL.md §4 has a row for op %u, which the codec does not know", op);
		return;
	}
	ck_assert_msg(r != NULL, "PROTOCOL.md §4 has no row for op %u (%s)", op, cua_op_name(op));
	char diff[4096] = "";
	if (strcmp(r->name, cua_op_name(op)) != 0)
		snprintf(diff, sizeof(diff), "\n  name: PROTOCOL.md '%s', the codec '%s'", r->name, cua_op_name(op));
	compare_body(r, 0, diff, sizeof(diff));
	compare_body(r, 1, diff, sizeof(diff));
	ck_assert_msg(diff[0] == '\0', "PROTOCOL.md §4 row | %u | %s | disagrees with common/cua_wire.c:%s", op,
		      r->name, diff);
}
END_TEST

START_TEST(spec_table_has_each_known_op_once)
{
	parse_spec();
	ck_assert_msg(spec_error[0] == '\0', "%s", spec_error);
	for (int i = 0; i < spec_nrows; i++) {
		ck_assert_msg(cua_op_name(spec_rows[i].op) != NULL, "PROTOCOL.md §4: op %u (%s) is not in the codec",
			      spec_rows[i].op, spec_rows[i].name);
		for (int k = 0; k < i; k++)
			ck_assert_msg(spec_rows[k].op != spec_rows[i].op, "PROTOCOL.md §4: op %u has two rows",
				      spec_rows[i].op);
	}
	int known = 0;
	for (uint32_t op = 1; op < CUA_OP_MAX; op++)
		known += cua_op_name(op) != NULL;
	ck_assert_int_eq(spec_nrows, known);
}
END_TEST

/* Every proto/vectors/NAME.hex that PROTOCOL.md names (globs aside) exists. */
START_TEST(files_named_by_spec_exist)
{
	parse_spec();
	ck_assert_msg(spec_text != NULL, "%s", spec_error);
	static const char key[] = "proto/vectors/";
	for (const char *p = strstr(spec_text, key); p != NULL; p = strstr(p + 1, key)) {
		size_t n = strspn(p + sizeof(key) - 1,
				  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.*-");
		char rel[256];
		snprintf(rel, sizeof(rel), "%.*s", (int)(sizeof(key) - 1 + n), p);
		if (strchr(rel, '*') != NULL || n == 0 || rel[strlen(rel) - 1] == '.')
			continue;
		char *text = slurp(rel);
		ck_assert_msg(text != NULL, "PROTOCOL.md names %s, which does not exist", rel);
		free(text);
	}
}
END_TEST

static Suite *
vectors_suite(void)
{
	Suite *s = suite_create("vectors");
	TCase *tc = tcase_create("files");
	tcase_add_loop_test(tc, vector_file_is_what_its_row_encodes_to, 0, (int)vec_nrows);
	tcase_add_test(tc, every_vector_file_has_a_row);
	tcase_add_loop_test(tc, vector_decodes_and_reencodes_exactly, 0, (int)vec_nrows);
	tcase_add_test(tc, vectors_form_one_session_covering_every_op);
	tcase_add_test(tc, batch_reply_answers_the_batch_request);
	suite_add_tcase(s, tc);
	tc = tcase_create("spec");
	tcase_add_loop_test(tc, spec_row_matches_codec, 1, CUA_OP_MAX);
	tcase_add_test(tc, spec_table_has_each_known_op_once);
	tcase_add_test(tc, files_named_by_spec_exist);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(vectors_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
