/*
 * cuad-lock.h — fe->lock as clang's thread-safety analysis names it (common/cua_tsa.h; daemon.h's "Locking").
 *
 * The analysis cannot name fe->lock where it matters: in C, clang 14 takes neither a sibling field (guarded_by(lock)
 * inside struct fe) nor a path through one (fe->lock inside struct device), and struct session has no path to its
 * fe at all. So every annotation names cuad_fe_lock instead, the one global capability that stands for fe->lock:
 * fields say CUA_GUARDED_BY(cuad_fe_lock), do_* functions CUA_REQUIRES(cuad_fe_lock), and fe_lock / fe_unlock
 * (daemon.h) take and give it. There is one struct fe per process (the unit tests make one at a time), so the two
 * are the same lock. cuad_fe_lock is declared only: never defined, never locked, named in annotations alone (which
 * GCC does not see).
 */
#ifndef CUAD_LOCK_H
#define CUAD_LOCK_H

#include "cua_tsa.h"

struct CUA_CAPABILITY("mutex") cuad_fe_lock;
extern struct cuad_fe_lock cuad_fe_lock;

#endif
