/* The operations table (daemon/cmd.h) is the one source of truth about each op: every op of the protocol has a
 * row with every field the generic code needs, the rows agree with the worker records they plan (link/wrec.h)
 * and with the wire schema (common/cua_wire.c), and the metrics count every op in its row's family. */
#include "config.h"

#include "cmd.h"
#include "cua_wire.h"
#include "stats.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t ops[] = {
#define X_OP(name, value) CUA_OP_##name,
	CUA_OP_TABLE(X_OP)
#undef X_OP
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static bool
is_op(uint32_t op)
{
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i] == op)
			return true;
	return false;
}

START_TEST(every_op_has_a_complete_row)
{
	for (size_t i = 0; i < NOPS; i++) {
		uint32_t op = ops[i];
		const struct cmd_entry *row = cmd_find(op);
		const char *name = cua_op_name(op);
		ck_assert_msg(row != NULL, "%s has no row", name);
		ck_assert_msg(row->op == op, "%s's row says op %u", name, row->op);
		ck_assert_msg(row->family > SF_NONE && row->family < SF_NFAMILIES, "%s's row has no metrics family",
			      name);
		ck_assert_msg(row->validate != NULL || row->validate_items != NULL || row->item != NULL,
			      "%s's row cannot validate", name);
		ck_assert_msg(row->wrec < WR_OP_MAX, "%s's row names worker command %u", name, row->wrec);
		if (row->flags & CMD_BATCHED)
			ck_assert_msg(row->item != NULL, "%s may be batched but its row has no item planner", name);
		if (row->flags & CMD_RELEASES)
			ck_assert_msg(row->complete != NULL && row->abandon != NULL,
				      "%s releases an object but its row cannot settle or give it back", name);
		/* stream work plans a worker command that names its stream, and only stream work does */
		bool stream = (row->flags & CMD_STREAM) != 0;
		ck_assert_msg(stream == ((wrec_flags(row->wrec) & WRF_STREAM) != 0),
			      "%s: the row's CMD_STREAM and its worker command's WRF_STREAM disagree", name);
		if (row->flags & CMD_REPLY_UNLOCKED) /* its reply is built after the lock was let go: no table work */
			ck_assert_msg(row->complete == NULL, "%s: a reply encoded without the lock after a complete",
				      name);
		if (row->flags & CMD_AUTHENTICATES)
			ck_assert_msg(!(row->flags & CMD_HELLO), "%s carries the token but needs HELLO first", name);
		/* the wire codec knows it, request and reply */
		cua_wire_field_info f[64];
		ck_assert_msg(cua_wire_schema_fields(op, 0, f, 64) >= 0, "%s has no request schema", name);
		ck_assert_msg(cua_wire_schema_fields(op, 1, f, 64) >= 0, "%s has no reply schema", name);
	}
	/* no row for a value that is not an op, and the table ends where the protocol does */
	for (uint32_t op = 0; op < CUA_OP_MAX + 8; op++)
		if (!is_op(op))
			ck_assert_msg(cmd_find(op) == NULL, "op %u has a row but is not in CUA_OP_TABLE", op);
}
END_TEST

/* Only the HELLO row may be sent before a required token; only requests the operator endpoint may refuse are
 * CMD_OPERATOR; the one quota-exempt op is the one an overloaded client needs to look at itself. */
START_TEST(generic_flags_where_the_protocol_says)
{
	for (size_t i = 0; i < NOPS; i++) {
		const struct cmd_entry *row = cmd_find(ops[i]);
		ck_assert_msg(((row->flags & CMD_AUTHENTICATES) != 0) == (ops[i] == CUA_OP_HELLO), "%s",
			      cua_op_name(ops[i]));
		ck_assert_msg(((row->flags & CMD_QUOTA_EXEMPT) != 0) == (ops[i] == CUA_OP_STATUS), "%s",
			      cua_op_name(ops[i]));
		ck_assert_msg(!(row->flags & CMD_HELLO) == (ops[i] == CUA_OP_HELLO || ops[i] == CUA_OP_PING), "%s",
			      cua_op_name(ops[i]));
	}
	/* every op whose worker command makes a limited object reserves it at admission (daemon/reserve.h), and no
	 * other does */
	static const uint32_t makes[] = {WR_MEM_ALLOC,    WR_MODULE_LOAD,   WR_FUNCTION_GET, WR_STREAM_CREATE,
					 WR_EVENT_CREATE, WR_HOST_REGISTER, WR_GRAPH_CREATE};
	for (size_t i = 0; i < NOPS; i++) {
		const struct cmd_entry *row = cmd_find(ops[i]);
		bool make = false;
		for (size_t k = 0; k < sizeof(makes) / sizeof(makes[0]); k++)
			make = make || row->wrec == makes[k];
		ck_assert_msg((row->reserve != NULL) == make, "%s: %s", cua_op_name(ops[i]),
			      make ? "makes an object but reserves nothing" : "reserves but makes no object");
	}
	ck_assert(cmd_find(CUA_OP_DISCONNECT)->flags & CMD_OPERATOR);
	ck_assert(cmd_find(CUA_OP_DRAIN)->flags & CMD_OPERATOR);
	ck_assert(!(cmd_find(CUA_OP_SESSIONS)->flags & CMD_OPERATOR)); /* a client sees its own session */
}
END_TEST

static struct fe fe;

/* The value of series (exactly as written) in text; -1 when absent. */
static double
value(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static double
family_count(uint32_t op)
{
	struct stats_snap snap;
	size_t len = 0;
	char series[128];
	static const char *const names[SF_NFAMILIES] = {NULL,     "info",   "operator", "module", "memory", "copy",
							"stream", "launch", "batch",    "event",  "graph"};
	ck_assert_int_eq(stats_snapshot(&fe, false, &snap), 0);
	char *text = stats_format(&snap, &len);
	stats_snap_free(&snap);
	ck_assert_ptr_nonnull(text);
	snprintf(series, sizeof(series), "cuasyncd_request_duration_seconds_count{family=\"%s\"}",
		 names[cmd_find(op)->family]);
	double v = value(text, series);
	free(text);
	return v;
}

/* Each op, answered once, adds one to its own family's histogram: the row decides, no switch elsewhere. */
START_TEST(metrics_count_every_op_in_its_family)
{
	fe_init(&fe);
	for (size_t i = 0; i < NOPS; i++) {
		const struct cmd_entry *row = cmd_find(ops[i]);
		double before = family_count(ops[i]);
		ck_assert_msg(before >= 0, "%s: its family has no series", cua_op_name(ops[i]));
		do_stats_request(&fe, ops[i], row->family, CUA_OK, 1000);
		ck_assert_msg(family_count(ops[i]) == before + 1, "%s not counted in its family", cua_op_name(ops[i]));
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("operations table");
	TCase *tc = tcase_create("rows");
	tcase_add_test(tc, every_op_has_a_complete_row);
	tcase_add_test(tc, generic_flags_where_the_protocol_says);
	tcase_add_test(tc, metrics_count_every_op_in_its_family);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
