// A 32-bit system call from a 64-bit process (int 0x80): a classic way
// around filters written for the 64-bit table. Must be killed or refused.
#include <stdio.h>

int main(void) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) /* i386 getpid */ : "memory");
    if (ret < 0) {
        puts("BLOCKED");
        return 0;
    }
    printf("ESCAPED getpid=%ld\n", ret);
    return 0;
}
