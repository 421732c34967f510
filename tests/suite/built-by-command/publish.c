/* A worker publishes a configuration pointer before filling it in; main
 * reads the setting if the pointer is there. A switch between the
 * publication and the fill makes main see 0, and its assertion fails.
 * Built by the manifest's own build command (FIXED=1 for the twin, which
 * fills the configuration before publishing it). */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

struct config { int workers; };
static struct config *volatile published;

static void *setup(void *arg) {
    struct config *c = calloc(1, sizeof *c);
#ifdef FIXED
    c->workers = 4;
    published = c;
#else
    published = c;
    syscall(SYS_gettid);
    c->workers = 4;
#endif
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, 0, setup, 0);
    syscall(SYS_getpid);
    struct config *c = published;
    if (c)
        assert(c->workers == 4);
    pthread_join(t, 0);
    return 0;
}
