/* sthread.c: the gcc oracle's build of the C-- thread library.
 *
 * Thesis listing A.4 ("GCC Thread Library", p. 90-91), changed in one way: sthread_create
 * returns a small integer handle from a table instead of the pthread_t itself, because a
 * pthread_t does not fit a C-- int on x86-64. The handle policy is the one of the Rust runtime
 * (crates/stackrt/src/threads.rs) so that programs printing handles give the same output:
 * the lowest free handle >= 1; a handle becomes free again only when it is joined.
 * The stack size rule is also the runtime's: fpStackSize > 0 asks for
 * max(fpStackSize rounded up to the page size, sysconf(_SC_THREAD_STACK_MIN)) bytes,
 * otherwise the default size.
 * A failing pthread_create prints one line naming the thread and the errno text and exits 1.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SLOT_FREE, SLOT_RUNNING, SLOT_JOINING };

struct slot {
    int state;
    pthread_t tid;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *table;
static int table_len;

/* Returns the index of the lowest free slot, growing the table; called with table_lock held. */
static int alloc_slot(void) {
    int i;
    for (i = 0; i < table_len; i++) {
        if (table[i].state == SLOT_FREE) {
            return i;
        }
    }
    {
        int new_len = table_len == 0 ? 16 : table_len * 2;
        struct slot *t = realloc(table, (size_t)new_len * sizeof *t);
        if (t == NULL) {
            fprintf(stderr, "sthread_create: out of memory for the thread table\n");
            exit(1);
        }
        for (i = table_len; i < new_len; i++) {
            t[i].state = SLOT_FREE;
        }
        table = t;
        i = table_len;
        table_len = new_len;
        return i;
    }
}

int sthread_create(void *arg, int fp, int fpStackSize) {
    pthread_attr_t attr;
    void *(*entry)(void *);
    int idx;
    int rc;

    /* A C-- function address is an int; -no-pie keeps it below 2 GiB: zero-extend. */
    entry = (void *(*)(void *))(uintptr_t)(unsigned int)fp;

    if (pthread_attr_init(&attr) != 0) {
        perror("pthread_attr_init");
        exit(1);
    }
    if (fpStackSize > 0) {
        long page = sysconf(_SC_PAGESIZE);
        long min = sysconf(_SC_THREAD_STACK_MIN);
        size_t size = ((size_t)fpStackSize + (size_t)page - 1) / (size_t)page * (size_t)page;
        if (min > 0 && size < (size_t)min) {
            size = (size_t)min;
        }
        if (pthread_attr_setstacksize(&attr, size) != 0) {
            perror("pthread_attr_setstacksize");
            exit(1);
        }
    }

    pthread_mutex_lock(&table_lock);
    idx = alloc_slot();
    rc = pthread_create(&table[idx].tid, &attr, entry, arg);
    if (rc != 0) {
        fprintf(stderr, "sthread_create: cannot create thread %d: %s\n", idx + 1, strerror(rc));
        exit(1);
    }
    table[idx].state = SLOT_RUNNING;
    pthread_mutex_unlock(&table_lock);
    pthread_attr_destroy(&attr);
    return idx + 1;
}

int sthread_join(int id, void **retval) {
    pthread_t tid;
    int rc;

    pthread_mutex_lock(&table_lock);
    if (id < 1 || id > table_len || table[id - 1].state != SLOT_RUNNING) {
        pthread_mutex_unlock(&table_lock);
        return ESRCH;
    }
    table[id - 1].state = SLOT_JOINING;
    tid = table[id - 1].tid;
    pthread_mutex_unlock(&table_lock);

    rc = pthread_join(tid, retval);

    pthread_mutex_lock(&table_lock);
    table[id - 1].state = rc == 0 ? SLOT_FREE : SLOT_RUNNING;
    pthread_mutex_unlock(&table_lock);
    return rc;
}

void sthread_exit(void *val) {
    pthread_exit(val);
}

/* Under OS threads, as in the runtime: let another thread run. */
void sthread_yield(void) {
    sched_yield();
}

void *sthread_mutex_create(void) {
    pthread_mutex_t *m = malloc(sizeof(pthread_mutex_t));
    if (m == NULL) {
        fprintf(stderr, "sthread_mutex_create: out of memory\n");
        exit(1);
    }
    pthread_mutex_init(m, NULL);
    return m;
}

void sthread_mutex_destroy(void *m) {
    pthread_mutex_destroy((pthread_mutex_t *)m);
    free(m);
}

void sthread_mutex_lock(void *m) {
    pthread_mutex_lock((pthread_mutex_t *)m);
}

void sthread_mutex_unlock(void *m) {
    pthread_mutex_unlock((pthread_mutex_t *)m);
}

/* Compare-and-swap, as in the runtime: replaces *p by new if it holds old, returns the value
   *p held before (it swapped if that is old). Sequentially consistent. */
int sthread_cas(int *p, int old, int new) {
    int expected = old;
    __atomic_compare_exchange_n(p, &expected, new, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
