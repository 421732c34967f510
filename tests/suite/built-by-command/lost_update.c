/* Two workers add to a counter through a read, a system call and a write;
 * a switch between them loses an add, and the assertion fails. Built by
 * the manifest's own build command (with FIXED=1 for the twin, which takes
 * a lock around the update). */
#include <assert.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>

static int count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg) {
    for (int i = 0; i < 3; i++) {
#ifdef FIXED
        pthread_mutex_lock(&lock);
#endif
        int c = count;
        syscall(SYS_gettid);
        count = c + 1;
#ifdef FIXED
        pthread_mutex_unlock(&lock);
#endif
    }
    return arg;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, work, 0);
    pthread_create(&b, 0, work, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    assert(count == 6);
    return 0;
}
