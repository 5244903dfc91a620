/*
 * test_conformance.c — the daemon against proto/PROTOCOL.md, one case per rule tag [R:...], driven only by
 * raw messages built from the spec's tables (tests/conformance/mp.c encodes them; no libcuasync, no common/).
 * This file assembles the suite: the cases live by family in framing.c, seq.c, session.c, handles.c, requests.c,
 * hostbuf.c, batch.c, limits.c, auth.c, kfeat.c, lattr.c, event.c, graphs.c and contract.c (their helpers in rules.c), each
 * listing its rules. The case "spec-coverage" parses PROTOCOL.md and fails listing every tag without a case and
 * every case whose tag left the spec. Each case runs against a fresh daemon (emulated device) on a private socket.
 */
#include "config.h"

#include "auth.h"
#include "rules.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dmn conf_dmn; /* each case's daemon, default options */
#define D conf_dmn

static void
up(void)
{
	dmn_start(&D, NULL);
}

static void
down(void)
{
	dmn_stop(&D);
}

/* ------------------------------------------------------------------ the rule table */

/* The cases of credentials (auth.c), the way the other families list theirs. */
static size_t
auth_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"auth-first", conf_auth_first()},
		{"hello-token", conf_hello_token()},
		{"operator-identity", conf_operator_identity()},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}

/* The cases, one row per tag, family by family (Check's test objects are not constant expressions: filled at
 * run time); each family adds at most 8. */
static size_t
rules_get(struct rule *out, size_t cap)
{
	size_t (*const families[])(struct rule *) = {framing_rules, seq_rules,      session_rules, handle_rules,
						     request_rules, hostbuf_rules,  batch_rules,   limit_rules,
						     auth_rules,    kfeat_rules,    lattr_rules,   event_rules,
						     graph_rules,   contract_rules, fdchan_rules,  tenant_rules};
	size_t n = 0;
	for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
		if (n + 8 > cap)
			abort(); /* a bug in this file: raise the callers' cap */
		n += families[k](out + n);
	}
	return n;
}

static bool
has_case(const struct rule *rules, size_t n, const char *tag)
{
	for (size_t k = 0; k < n; k++)
		if (strcmp(rules[k].tag, tag) == 0)
			return true;
	return false;
}

/* Every [R:tag] of PROTOCOL.md has a case, and every case a tag; the failure lists both kinds. */
START_TEST(spec_coverage)
{
	FILE *f = fopen(CUA_SRCDIR "/proto/PROTOCOL.md", "r");
	ck_assert_msg(f != NULL, "cannot read %s/proto/PROTOCOL.md", CUA_SRCDIR);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	char missing[4096] = "", stale[4096] = "";
	struct rule rules[128];
	size_t nrules = rules_get(rules, sizeof(rules) / sizeof(rules[0]));
	for (const char *p = text; (p = strstr(p, "[R:")) != NULL; p += 3) {
		const char *end = strchr(p, ']');
		char tag[64];
		if (end == NULL || end - p - 3 >= (long)sizeof(tag))
			continue;
		snprintf(tag, sizeof(tag), "%.*s", (int)(end - p - 3), p + 3);
		if (!has_case(rules, nrules, tag) && strstr(missing, tag) == NULL)
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", tag);
	}
	for (size_t k = 0; k < nrules; k++) {
		char want[80];
		snprintf(want, sizeof(want), "[R:%s]", rules[k].tag);
		if (strstr(text, want) == NULL)
			snprintf(stale + strlen(stale), sizeof(stale) - strlen(stale), " %s", rules[k].tag);
	}
	ck_assert_msg(missing[0] == '\0' && stale[0] == '\0', "rules without a case:%s; cases without a rule:%s",
		      missing[0] ? missing : " none", stale[0] ? stale : " none");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conformance");
	TCase *cov = tcase_create("spec-coverage");
	tcase_add_test(cov, spec_coverage);
	suite_add_tcase(s, cov);
	struct rule rules[128];
	size_t nrules = rules_get(rules, sizeof(rules) / sizeof(rules[0]));
	for (size_t k = 0; k < nrules; k++) {
		TCase *tc = tcase_create(rules[k].tag); /* one case per tag, named after it */
		tcase_add_checked_fixture(tc, up, down);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, rules[k].test);
		suite_add_tcase(s, tc);
	}
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}