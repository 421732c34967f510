/* Two accounts, each with its lock; a transfer locks the source, then the
 * destination. Two transfers in opposite directions deadlock when each
 * takes its first lock before the other takes its second (a getpid, as an
 * audit call, sits between). Fixed: both lock the lower account first. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

struct account { pthread_mutex_t lock; int balance; };
static struct account accounts[2] = {
    { PTHREAD_MUTEX_INITIALIZER, 100 }, { PTHREAD_MUTEX_INITIALIZER, 100 },
};

static void *transfer(void *arg) {
    long from = (long)arg, to = 1 - from;
    struct account *first = &accounts[from], *second = &accounts[to];
#ifdef FIXED
    if (from > to) { first = &accounts[to]; second = &accounts[from]; }
#endif
    pthread_mutex_lock(&first->lock);
    syscall(SYS_getpid);
    pthread_mutex_lock(&second->lock);
    accounts[from].balance -= 10;
    accounts[to].balance += 10;
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, transfer, (void *)0);
    pthread_create(&b, 0, transfer, (void *)1);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%d %d\n", accounts[0].balance, accounts[1].balance);
    return 0;
}
