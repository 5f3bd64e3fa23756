// Any network family but AF_UNIX must be refused at socket().
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

int main(void) {
    int families[] = {AF_INET, AF_INET6, AF_PACKET, AF_NETLINK, 40 /* AF_VSOCK */, AF_BLUETOOTH};
    for (unsigned i = 0; i < sizeof families / sizeof families[0]; i++) {
        int fd = socket(families[i], SOCK_STREAM, 0);
        if (fd >= 0 || errno != EPERM) {
            int fd2 = socket(families[i], SOCK_RAW, 0);
            if (fd >= 0 || fd2 >= 0) {
                printf("ESCAPED family %d\n", families[i]);
                return 0;
            }
        }
    }
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    puts(u >= 0 ? "BLOCKED" : "ESCAPED-WRONGLY: AF_UNIX refused too");
    return 0;
}
