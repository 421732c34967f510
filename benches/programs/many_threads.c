/* Parks N threads on one condition variable, makes 2000 cheap system
 * calls, then wakes and joins them all. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int go, ready;
static void *park(void *a) {
    pthread_mutex_lock(&m);
    ready++;
    while (!go) pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return a;
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    pthread_t *t = malloc(n * sizeof *t);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 65536);
    for (int i = 0; i < n; i++) pthread_create(&t[i], &at, park, 0);
    for (;;) { pthread_mutex_lock(&m); int r = ready; pthread_mutex_unlock(&m); if (r == n) break; }
    for (int i = 0; i < 2000; i++) getppid();
    pthread_mutex_lock(&m); go = 1; pthread_cond_broadcast(&c); pthread_mutex_unlock(&m);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    printf("%d threads\n", n);
    return 0;
}
