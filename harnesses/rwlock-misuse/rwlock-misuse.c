/*
 * A writer that updates shared data while holding only the read side of a
 * pthread rwlock.
 *
 * The table keeps an invariant: checksum == version * 31 + 7.  The writer
 * sets `version`, bumps a statistics counter under its own mutex, and then
 * sets `checksum`.  Two readers take the read lock and assert the invariant.
 *
 * Bug: the writer takes pthread_rwlock_rdlock instead of wrlock, so readers
 * are admitted while it is halfway through.  If the writer is preempted
 * between its two stores (at the statistics mutex) and a reader runs, the
 * reader's assert aborts.  One preemption; the window holds only pthread
 * calls, so the shim is needed.
 *
 * Fix (-DFIXED): the writer takes the write lock, which excludes readers
 * for the whole update.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

#define UPDATES 2
#define READS 1

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct {
    int version;
    int checksum;
} table = {0, 7};

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int updates, reads;

static void count(int *counter)
{
    pthread_mutex_lock(&stats_lock);
    (*counter)++;
    pthread_mutex_unlock(&stats_lock);
}

static void *writer(void *arg)
{
    (void)arg;
    for (int v = 1; v <= UPDATES; v++) {
#ifdef FIXED
        pthread_rwlock_wrlock(&table_lock);
#else
        pthread_rwlock_rdlock(&table_lock); /* should be the write lock */
#endif
        table.version = v;
        count(&updates);
        table.checksum = v * 31 + 7;
        pthread_rwlock_unlock(&table_lock);
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < READS; i++) {
        pthread_rwlock_rdlock(&table_lock);
        assert(table.checksum == table.version * 31 + 7);
        pthread_rwlock_unlock(&table_lock);
        count(&reads);
    }
    return NULL;
}

/*
 * Busy work between thread starts.  Natively, threads started back to back
 * begin within microseconds of each other on different CPUs; this spaces
 * them out so the race stays as rare natively as races are in real
 * programs.  It makes no system call, so in the VM it is no scheduling
 * point and changes nothing.
 */
static void stagger(void)
{
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 100000; i++)
        sink += i;
}

int main(void)
{
    pthread_t w, r1, r2;
    pthread_create(&r1, NULL, reader, NULL);
    stagger();
    pthread_create(&w, NULL, writer, NULL);
    stagger();
    pthread_create(&r2, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r1, NULL);
    pthread_join(r2, NULL);
    printf("%d updates, %d reads, final version %d\n", updates, reads, table.version);
    return 0;
}
