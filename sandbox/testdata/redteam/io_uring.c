// io_uring_setup through the raw syscall: io_uring would carry out file
// and socket operations without seccomp seeing them.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    char params[120];
    memset(params, 0, sizeof params);
    long fd = syscall(425 /* io_uring_setup */, 8, params);
    if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
        puts("BLOCKED");
        return 0;
    }
    printf("ESCAPED fd=%ld errno=%d\n", fd, errno);
    return 0;
}
