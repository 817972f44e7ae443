/* What a squatter serves (issue 32): a Unix socket at PATH that answers every connection as an
 * agent would, "ok" to anything, and lists a module of its own with a terminal escape in its
 * name. A tool that trusted the socket's path believed it (tests/scripts/trust_test.sh).
 *   fake_agent PATH */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, argv[1], sizeof sa.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    unlink(argv[1]);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0) {
        perror("fake_agent");
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    static const char reply[] = ". liveprobe 9.9.9 pid 1 protocol 2\n. fake\x1b]0;owned\x07 module\nok\n";
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        char buf[4096];
        (void)!read(c, buf, sizeof buf);
        (void)!write(c, reply, sizeof reply - 1);
        close(c);
    }
}
