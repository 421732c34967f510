// A job queue with two bugs: the main thread may miss the wake-up of the
// last job (it checks for pending jobs before taking the lock), and the
// logger may print the message after main has taken it away.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_done = PTHREAD_COND_INITIALIZER;
static int pending = 2;
static char *message;

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    pending--;
    if (pending == 0)
        pthread_cond_signal(&job_done);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *logger(void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++) {
        write(1, "log: ", 5);
        size_t n = strlen(message);
        char line[32];
        int len = snprintf(line, sizeof line, "%zu\n", n);
        write(1, line, len);
    }
    return NULL;
}

int main(void) {
    message = strdup("working");
    pthread_t w[2], l;
    pthread_create(&l, NULL, logger, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, worker, NULL);
    if (pending > 0) {
        pthread_mutex_lock(&lock);
        pthread_cond_wait(&job_done, &lock);
        pthread_mutex_unlock(&lock);
    }
    free(message);
    message = NULL;
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    pthread_join(l, NULL);
    puts("done");
    return 0;
}
