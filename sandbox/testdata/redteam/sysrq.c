// Writing /proc/sysrq-trigger would act on the host kernel.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("/proc/sysrq-trigger", O_WRONLY);
    if (fd < 0) {
        puts("BLOCKED");
        return 0;
    }
    puts(write(fd, "h", 1) == 1 ? "ESCAPED" : "BLOCKED");
    return 0;
}
