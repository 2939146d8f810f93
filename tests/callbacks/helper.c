/* C code linked into tests/callbacks/c_yield.cm with `cmm compile --link`
 * (tests/callbacks.rs): a plain C function, and one that calls the thread library. */
int sthread_yield(void);

int helper_twice(int x) { return 2 * x; }

int helper_yield(int x) {
    sthread_yield();
    return x + 1;
}
