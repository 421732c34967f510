/*
 * A bug of depth 3: it needs three preemptions at three specific places.
 *
 * A session is shared by a client thread and a reaper thread; each state
 * change happens under the session lock, and between its steps each thread
 * records its thread id in a trace (gettid, a system call).
 *
 *   client: a1  IDLE -> OPEN
 *           a2  if CLOSE_REQUESTED: acknowledge, -> CLOSE_ACKED
 *           a3  write the final statistics into session.buffer, -> DONE
 *   reaper: b1  if OPEN: request a close, -> CLOSE_REQUESTED
 *           b2  if CLOSE_ACKED: the client has let go, so free the buffer
 *
 * Bug: the client's a3 writes to the buffer even after it acknowledged a
 * close.  That is harmful only in the order a1 b1 a2 b2 a3: the client must
 * be preempted after a1 (1), the reaper after b1 (2) and the client after
 * a2 (3); then the reaper frees the buffer and the client's a3 writes
 * through NULL: SIGSEGV.  Every other order passes: if the reaper starts
 * first, b1 finds IDLE; if the client runs a2 before b1, nothing was
 * requested; if a3 comes before b2, b2 finds DONE.  Every window holds a
 * gettid call, so no shim is needed.
 *
 * Fix (-DFIXED): after acknowledging a close the client no longer touches
 * the buffer (a3 checks for CLOSE_ACKED under the lock).  The reaper frees
 * the buffer only in CLOSE_ACKED, which nothing leaves, so the two can no
 * longer meet.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum state { IDLE, OPEN, CLOSE_REQUESTED, CLOSE_ACKED, DONE };

static struct {
    pthread_mutex_t lock;
    enum state state;
    int *buffer;
} session = {PTHREAD_MUTEX_INITIALIZER, IDLE, NULL};

static pid_t trace[8];
static int traced;

static void trace_step(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&session.lock);
    if (traced < 8)
        trace[traced++] = tid;
    pthread_mutex_unlock(&session.lock);
}

static void *client(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&session.lock); /* a1 */
    if (session.state == IDLE)
        session.state = OPEN;
    pthread_mutex_unlock(&session.lock);
    trace_step();

    pthread_mutex_lock(&session.lock); /* a2 */
    if (session.state == CLOSE_REQUESTED)
        session.state = CLOSE_ACKED;
    pthread_mutex_unlock(&session.lock);
    trace_step();

    pthread_mutex_lock(&session.lock); /* a3 */
#ifdef FIXED
    if (session.state != CLOSE_ACKED) {
        session.buffer[0] += 1;
        session.state = DONE;
    }
#else
    session.buffer[0] += 1; /* NULL if the reaper freed it */
    session.state = DONE;
#endif
    pthread_mutex_unlock(&session.lock);
    return NULL;
}

static void *reaper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&session.lock); /* b1 */
    if (session.state == OPEN)
        session.state = CLOSE_REQUESTED;
    pthread_mutex_unlock(&session.lock);
    trace_step();

    pthread_mutex_lock(&session.lock); /* b2 */
    if (session.state == CLOSE_ACKED) {
        free(session.buffer);
        session.buffer = NULL;
    }
    pthread_mutex_unlock(&session.lock);
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
    session.buffer = calloc(4, sizeof *session.buffer);
    if (session.buffer == NULL)
        return 1;
    pthread_t c, r;
    pthread_create(&c, NULL, client, NULL);
    stagger();
    pthread_create(&r, NULL, reaper, NULL);
    pthread_join(c, NULL);
    pthread_join(r, NULL);
    printf("session finished, %d trace records\n", traced);
    free(session.buffer);
    return 0;
}
