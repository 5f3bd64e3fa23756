// A fork bomb: the pids limit must stop it, and the run must end.
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int made = 0;
    for (int i = 0; i < 100000; i++) {
        pid_t p = fork();
        if (p == 0) {
            sleep(3);
            _exit(0);
        }
        if (p < 0) break;
        made++;
    }
    printf(made < 1000 ? "BLOCKED after %d\n" : "ESCAPED made %d\n", made);
    return 0;
}
