// A pseudoterminal pair as programs use one: posix_openpt, grantpt,
// unlockpt and ptsname; canonical mode (lines, echo and line editing,
// \n -> \r\n, tabs) and raw
// mode (bytes through unchanged); the window size; poll on both ends; a
// child writing to the slave as its stderr; and the ends' hangups (the
// master reads EIO once the slave is closed, the slave reads 0 and fails
// writes once the master is). Prints what it sees, which must be what it
// sees natively.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void show(const char *what, const char *buf, ssize_t n) {
    printf("%s: %zd", what, n);
    if (n < 0) {
        printf(" (%s)\n", strerror(errno));
        return;
    }
    printf(" \"");
    for (ssize_t i = 0; i < n; i++) {
        unsigned char c = buf[i];
        if (c == '\n')
            printf("\\n");
        else if (c == '\r')
            printf("\\r");
        else if (c < 32 || c > 126)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    printf("\"\n");
}

static void drain(const char *what, int fd) {
    char buf[256];
    show(what, buf, read(fd, buf, sizeof buf));
}

static void polled(const char *what, int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};
    int n = poll(&p, 1, 0);
    printf("poll %s: %d in=%d out=%d hup=%d err=%d\n", what, n, !!(p.revents & POLLIN),
           !!(p.revents & POLLOUT), !!(p.revents & POLLHUP), !!(p.revents & POLLERR));
}

/// Writes `in` to the master and shows what it echoes. Linux's slave
/// takes its input in on a worker, which a poll of it waits for: only
/// then is the echo in the master.
static void typed(int master, int slave, const char *in, size_t n, const char *what) {
    write(master, in, n);
    struct pollfd p = {.fd = slave, .events = POLLIN};
    poll(&p, 1, 0);
    drain(what, master);
}

/// Line editing as a terminal shows it: erasing a tab, a control
/// character and a word, the kill character, without ECHOE and ECHOCTL;
/// tabs on output, and expanded (XTABS).
static void editing(void) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    grantpt(master);
    unlockpt(master);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_NONBLOCK);
    fcntl(master, F_SETFL, O_NONBLOCK);
    typed(master, slave, "ab\tc\x7f\x7f\x7f", 7, "echo, a tab erased");
    typed(master, slave, "x\x01\x7f", 3, "echo, a control character erased");
    typed(master, slave, "yz\x15", 3, "echo, the line killed");
    typed(master, slave, "\x15", 1, "echo, an empty line killed");
    typed(master, slave, "q\n", 2, "echo, a line");
    drain("slave, the line", slave);
    struct termios t;
    tcgetattr(slave, &t);
    t.c_lflag &= ~(ECHOE | ECHOKE);
    tcsetattr(slave, TCSANOW, &t);
    typed(master, slave, "ab\x7f\x15", 4, "echo without ECHOE");
    t.c_lflag &= ~ECHOCTL;
    tcsetattr(slave, TCSANOW, &t);
    typed(master, slave, "a\x01\x7f\x7f\n", 5, "echo without ECHOCTL");
    drain("slave, what is left", slave);
    write(slave, "\tx\ty\r\n", 6);
    drain("master, tabs", master);
    t.c_oflag |= TAB3;
    tcsetattr(slave, TCSANOW, &t);
    write(slave, "ab\tc\n", 5);
    drain("master, tabs expanded", master);
    close(slave);
    close(master);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0) {
        perror("posix_openpt");
        return 1;
    }
    struct stat st;
    fstat(master, &st);
    printf("ptmx: char=%d mode=%o major=%u minor=%u\n", S_ISCHR(st.st_mode), st.st_mode & 07777,
           major(st.st_rdev), minor(st.st_rdev));
    printf("isatty(master)=%d\n", isatty(master));
    if (grantpt(master) || unlockpt(master)) {
        perror("grantpt/unlockpt");
        return 1;
    }
    const char *name = ptsname(master);
    printf("ptsname under /dev/pts/: %d\n", name && strncmp(name, "/dev/pts/", 9) == 0);

    // Before the slave is opened: nothing to read, and no reader yet.
    fcntl(master, F_SETFL, O_NONBLOCK);
    drain("master before the slave", master);
    polled("master before the slave", master);

    int slave = open(name, O_RDWR | O_NOCTTY);
    if (slave < 0) {
        perror("open slave");
        return 1;
    }
    fstat(slave, &st);
    printf("slave: char=%d major=%u isatty=%d\n", S_ISCHR(st.st_mode), major(st.st_rdev),
           isatty(slave));
    struct stat byname;
    printf("stat by name same rdev: %d\n", stat(name, &byname) == 0 && byname.st_rdev == st.st_rdev);
    fcntl(slave, F_SETFL, O_NONBLOCK);
    polled("master, slave open", master);
    polled("slave, nothing written", slave);

    struct termios t;
    tcgetattr(slave, &t);
    printf("default: icanon=%d echo=%d isig=%d icrnl=%d opost=%d onlcr=%d vmin=%d\n",
           !!(t.c_lflag & ICANON), !!(t.c_lflag & ECHO), !!(t.c_lflag & ISIG),
           !!(t.c_iflag & ICRNL), !!(t.c_oflag & OPOST), !!(t.c_oflag & ONLCR), t.c_cc[VMIN]);
    struct winsize ws;
    ioctl(slave, TIOCGWINSZ, &ws);
    printf("winsize: %d %d\n", ws.ws_row, ws.ws_col);
    ws.ws_row = 24;
    ws.ws_col = 80;
    ioctl(master, TIOCSWINSZ, &ws);
    memset(&ws, 0, sizeof ws);
    ioctl(slave, TIOCGWINSZ, &ws);
    printf("winsize set on the master, read on the slave: %d %d\n", ws.ws_row, ws.ws_col);

    // Canonical mode: a partial line is not readable, a full one is;
    // input is echoed to the master, and output gets \r\n.
    write(master, "par", 3);
    drain("slave, partial line", slave);
    polled("slave, partial line", slave);
    write(master, "tial\r", 5);
    polled("slave, full line", slave);
    drain("slave, full line (\\r became \\n)", slave);
    drain("master, the echo", master);
    write(master, "one\ntwo\n", 8);
    char small[2];
    show("slave, a line in a small buffer", small, read(slave, small, sizeof small));
    drain("slave, the rest of the line", slave);
    drain("slave, the next line", slave);
    drain("master, echo of two lines", master);
    write(slave, "out\nput\n", 8);
    polled("master, output waiting", master);
    drain("master, slave output", master);
    drain("master, nothing more", master);

    // Raw mode, as Nix puts a builder's pty in: bytes pass unchanged.
    cfmakeraw(&t);
    tcsetattr(slave, TCSANOW, &t);
    tcgetattr(slave, &t);
    printf("raw: icanon=%d echo=%d opost=%d vmin=%d vtime=%d\n", !!(t.c_lflag & ICANON),
           !!(t.c_lflag & ECHO), !!(t.c_oflag & OPOST), t.c_cc[VMIN], t.c_cc[VTIME]);
    write(slave, "a\nb\r\n", 5);
    drain("master, raw output", master);
    write(master, "x\ry\n\x03", 5);
    drain("slave, raw input", slave);
    drain("master, no echo", master);

    // A child writes to the slave as its stderr, as a builder does, and
    // ends; the parent's copy of the slave is closed too.
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(slave, 2);
        close(slave);
        close(master);
        write(2, "from the child\n", 15);
        _exit(0);
    }
    close(slave);
    int status;
    waitpid(pid, &status, 0);
    printf("child exited %d\n", WEXITSTATUS(status));
    polled("master, slave closed", master);
    drain("master, the child's output", master);
    drain("master, the slave closed", master);
    polled("master, drained, slave closed", master);
    fcntl(master, F_SETFL, 0);
    drain("master, blocking, the slave closed", master);

    // The slave reopened, then the master closed: the slave hung up.
    slave = open(name, O_RDWR | O_NOCTTY);
    printf("slave reopened: %d\n", slave >= 0);
    close(master);
    polled("slave, master closed", slave);
    drain("slave, master closed", slave);
    ssize_t w = write(slave, "x", 1);
    printf("slave write, master closed: %zd (%s)\n", w, w < 0 ? strerror(errno) : "-");
    close(slave);
    int again = open(name, O_RDWR | O_NOCTTY);
    printf("open of the gone slave: %d (%s)\n", again, again < 0 ? strerror(errno) : "-");

    // A locked slave cannot be opened.
    int m2 = posix_openpt(O_RDWR | O_NOCTTY);
    int locked = open(ptsname(m2), O_RDWR | O_NOCTTY);
    printf("open of a locked slave: %d (%s)\n", locked, locked < 0 ? strerror(errno) : "-");
    int fd = open("/dev/null", O_RDWR);
    int r = tcgetattr(fd, &t);
    printf("tcgetattr(/dev/null): %d (%s)\n", r, strerror(errno));
    editing();
    return 0;
}
