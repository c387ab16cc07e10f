/* The C code of each library name: `codes KIND NAME...` prints one line
 * "NAME=CODE" per name, CODE being what coo_parse_name gives (-100 when it
 * fails). tests/programs.rs passes every name of the library's tables and
 * compares each code with the header's constant of that name. */
#include <coo_assembler.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    for (int i = 2; i < argc; i++) {
        int code = -100;
        if (coo_parse_name(argv[1], argv[i], &code) != COO_OK)
            code = -100;
        printf("%s=%d\n", argv[i], code);
    }
    return 0;
}
