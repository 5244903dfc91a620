/*
 * cua_tsa.h — clang's thread-safety analysis for C (STYLE.md rule 22: say which lock guards which field, and let
 * the compiler check it). The macros follow clang's documented mutex.h; they expand to nothing unless the compiler
 * knows the capability attribute (clang), so a GCC build is unchanged. ./configure --enable-thread-safety (clang)
 * turns the analysis on with -Wthread-safety -Werror=thread-safety.
 *
 * What clang 14 accepts in C (found by experiment, and why the annotations read as they do):
 *   - a capability attribute on a typedef of pthread_mutex_t (cua_mutex below), and on an incomplete struct type
 *     (a lock that exists only as a name for the analysis, as daemon.h's cuad_fe_lock);
 *   - CUA_REQUIRES / CUA_ACQUIRE / CUA_EXCLUDES naming a parameter's field: CUA_REQUIRES(c->lock);
 *   - CUA_GUARDED_BY naming a global only. A sibling field (GUARDED_BY(lock) inside the struct that holds lock)
 *     or a path through one (fe->lock inside struct device) is "use of undeclared identifier" in C: clang parses
 *     those late in C++ only. So a field guarded by a lock of another object names a global capability that
 *     stands for that lock (daemon.h: cuad_fe_lock for fe->lock), and fields that no such name fits carry their
 *     lock in a comment only.
 * The analysis is per function: a function that takes a lock and lets another release it (or hands an object to
 * another thread by convention rather than by lock) is marked CUA_NO_TSA, the smallest one, saying why it is safe.
 */
#ifndef CUA_TSA_H
#define CUA_TSA_H

#include <pthread.h>

#if defined(__has_attribute)
#if __has_attribute(capability)
#define CUA_TSA_ON 1
#endif
#endif

#ifdef CUA_TSA_ON
#define CUA_TSA_ATTR(x) __attribute__((x))
#else
#define CUA_TSA_ATTR(x) /* not clang: no analysis */
#endif

/* A type whose objects are locks (its argument names the kind in messages: "mutex"). */
#define CUA_CAPABILITY(name) CUA_TSA_ATTR(capability(name))
/* A field or global that may be read or written only while the lock is held (writes: held exclusively). */
#define CUA_GUARDED_BY(lock) CUA_TSA_ATTR(guarded_by(lock))
/* A pointer whose target (not the pointer itself) is guarded by the lock. */
#define CUA_PT_GUARDED_BY(lock) CUA_TSA_ATTR(pt_guarded_by(lock))
/* The caller must hold the lock(s). */
#define CUA_REQUIRES(...) CUA_TSA_ATTR(requires_capability(__VA_ARGS__))
/* The caller must not hold the lock(s): the function takes them itself. */
#define CUA_EXCLUDES(...) CUA_TSA_ATTR(locks_excluded(__VA_ARGS__))
/* The function returns with the lock(s) held / released. */
#define CUA_ACQUIRE(...) CUA_TSA_ATTR(acquire_capability(__VA_ARGS__))
#define CUA_RELEASE(...) CUA_TSA_ATTR(release_capability(__VA_ARGS__))
/* The analysis skips the function's body (its declaration's annotations still bind its callers). */
#define CUA_NO_TSA CUA_TSA_ATTR(no_thread_safety_analysis)

/* A pthread mutex that the analysis knows is a lock: initialise and destroy it with pthread_mutex_init/destroy,
 * take it with the wrappers below. */
typedef pthread_mutex_t CUA_CAPABILITY("mutex") cua_mutex;

static inline void
cua_mutex_lock(cua_mutex *m) CUA_ACQUIRE(*m) CUA_NO_TSA
{
	pthread_mutex_lock(m);
}

static inline void
cua_mutex_unlock(cua_mutex *m) CUA_RELEASE(*m) CUA_NO_TSA
{
	pthread_mutex_unlock(m);
}

/* Waits on cv, m held before and after (pthread_cond_wait releases it meanwhile). */
static inline int
cua_cond_wait(pthread_cond_t *cv, cua_mutex *m) CUA_REQUIRES(*m) CUA_NO_TSA
{
	return pthread_cond_wait(cv, m);
}

static inline int
cua_cond_timedwait(pthread_cond_t *cv, cua_mutex *m, const struct timespec *until) CUA_REQUIRES(*m) CUA_NO_TSA
{
	return pthread_cond_timedwait(cv, m, until);
}

#endif
