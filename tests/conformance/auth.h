/*
 * auth.h — the conformance cases of PROTOCOL.md §2's credentials (auth.c), for the rule table.
 */
#ifndef CONF_AUTH_H
#define CONF_AUTH_H

#include <check.h>

const TTest *conf_auth_first(void);        /* [R:auth-first] */
const TTest *conf_hello_token(void);       /* [R:hello-token] */
const TTest *conf_operator_identity(void); /* [R:operator-identity] */

#endif
