/* The installed ``padconv`` command on POSIX systems: SIGINT is held back from here on.
 *
 * The interpreter installs its own SIGINT handler early in its start-up and only then runs
 * ``site`` (and every .pth file) and the script's first statement; a Ctrl-C in that window got
 * CPython's own report (a fatal error, a traceback, or a .pth file skipped and the run going
 * on).  This program blocks SIGINT, then execs the Python part of the command, installed beside
 * it as ``.padconv-main`` with the interpreter chosen by the installer (its ``#!`` line).  A
 * blocked signal stays pending across exec; the Python part installs padconv's handler and
 * only then unblocks SIGINT, so a Ctrl-C at any moment reaches padconv's handler: one line,
 * exit 130.  A SIGINT before the ``sigprocmask`` below kills the process without a word.
 *
 * Everything else passes through: the arguments, the environment, the standard streams, every
 * other signal's disposition and the rest of the mask.  The Python part is told, in two leading
 * arguments it removes, the path this command was run by (its ``sys.argv[0]``, as for any
 * script) and whether SIGINT was already blocked by the caller (then it stays blocked).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define PYTHON_PART ".padconv-main"
#define EXIT_CANNOT_RUN 127

/* The folder of this program's own file, symbolic links resolved ("" when unknown). */
static void own_folder(char *folder, size_t size, const char *fallback)
{
    ssize_t length = readlink("/proc/self/exe", folder, size - 1);
    if (length > 0) {
        folder[length] = '\0';
    } else if (fallback == NULL || realpath(fallback, folder) == NULL) {
        folder[0] = '\0';
        return;
    }
    char *slash = strrchr(folder, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
}

int main(int argc, char **argv)
{
    sigset_t interrupt, before;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    sigprocmask(SIG_BLOCK, &interrupt, &before);

    const char *run_as = (const char *)getauxval(AT_EXECFN);
    if (run_as == NULL) {
        run_as = argc > 0 ? argv[0] : "padconv";
    }
    char folder[PATH_MAX];
    own_folder(folder, sizeof folder, run_as);
    char script[PATH_MAX + sizeof PYTHON_PART + 1];
    snprintf(script, sizeof script, "%s/%s", folder, PYTHON_PART);

    char **arguments = calloc((size_t)argc + 3, sizeof *arguments);
    if (arguments == NULL) {
        fputs("padconv: out of memory\n", stderr);
        return EXIT_CANNOT_RUN;
    }
    arguments[0] = script;
    arguments[1] = sigismember(&before, SIGINT) ? "--padconv-launched=blocked"
                                                : "--padconv-launched=unblock";
    arguments[2] = (char *)run_as;
    for (int i = 1; i < argc; ++i) {
        arguments[i + 2] = argv[i];
    }
    execv(script, arguments);
    fprintf(stderr, "padconv: cannot run %s: %s\n", script, strerror(errno));
    return EXIT_CANNOT_RUN;
}
