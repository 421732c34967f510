/*
 * Signal delivery with handlers the program installs itself:
 *  1. a SIGUSR1 handler (sigaction), raised with raise(), i.e. tgkill to the
 *     calling thread; the handler returns through rt_sigreturn;
 *  2. a SIGSEGV handler that siglongjmps out of a NULL-pointer read, so the
 *     fault is survived and the program goes on.
 * Exits 0 when both handlers ran.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t usr1_seen;
static sigjmp_buf recover;
static int *volatile null_pointer;

static void on_usr1(int sig)
{
    usr1_seen = sig;
}

static void on_segv(int sig, siginfo_t *info, void *context)
{
    (void)context;
    (void)info;
    siglongjmp(recover, sig);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 1;
    raise(SIGUSR1);
    printf("SIGUSR1 handler ran: %s\n", usr1_seen == SIGUSR1 ? "yes" : "no");

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return 1;
    int caught = sigsetjmp(recover, 1);
    if (caught == 0) {
        int value = *null_pointer; /* faults */
        printf("not reached: %d\n", value);
        return 1;
    }
    printf("SIGSEGV handler ran and recovered: %s\n", caught == SIGSEGV ? "yes" : "no");
    return usr1_seen == SIGUSR1 && caught == SIGSEGV ? 0 : 1;
}
