// Opening a GPU node that is not the run's lease (and the raw GPU control
// node of a second card): the run must not find or open them.
#include <fcntl.h>
#include <stdio.h>

int main(void) {
    const char *nodes[] = {"/dev/nvidia1", "/dev/nvidia7", "/dev/dri/renderD129", "/dev/kfd"};
    for (unsigned i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        if (open(nodes[i], O_RDWR) >= 0) {
            printf("ESCAPED %s\n", nodes[i]);
            return 0;
        }
    }
    puts("BLOCKED");
    return 0;
}
