/* Process-wide runtime settings for scorch-run, applied before any library initialises.
 *
 * Runs from the executable's .preinit_array, i.e. before the constructors of the shared libraries
 * (libgomp reads its environment in its constructor, so setting it from main would be too late).
 *
 * OpenMP waiting: libgomp's default lets idle threads spin about 300000 iterations at every barrier
 * before sleeping. oneDNN and our kernels open hundreds of parallel regions per forward pass, and
 * on a machine with any other load a spinning thread steals the core its partner needs: ResNet-50
 * at 2 threads measured 3.4-4.2 s with the default against 0.19-0.29 s with a short spin (load 11 on
 * 2 cores). Sleeping at once (OMP_WAIT_POLICY=passive) pays a futex wake-up per region instead:
 * ResNet-50 49 ms and GPT-2 small 152 ms on an idle 2-core machine against 40 and 124 ms with
 * GOMP_SPINCOUNT=10000, and 143 against 92 ms for ResNet-50 beside two busy processes. scorch-run
 * therefore runs with GOMP_SPINCOUNT=10000 (a spin of a few microseconds, then sleep). Anything the
 * user set (OMP_WAIT_POLICY, GOMP_SPINCOUNT) wins.
 *
 * malloc: the executor allocates activations per node and frees them after their last use. glibc
 * serves blocks above the mmap threshold with fresh mmaps and trims the heap top eagerly, so every
 * pass page-faulted its activations again (clear_page + fault handling were 10-20% of a GPT-2
 * forward). A fixed 32 MiB mmap threshold (glibc's maximum) and a 256 MiB trim threshold keep freed activations in the heap
 * for the next node and the next pass. MALLOC_* environment settings are left to win.
 */
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool env_has(char **envp, const char *name) {
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return true;
    return false;
}

/* glibc's own start-up assigns environ from the original envp after .preinit_array runs, so a
 * setenv here would be lost: the process instead re-executes itself once with the setting added.
 * When that fails (no /proc), it runs on with libgomp's default. */
static void runtime_env_spin(char **argv, char **envp) {
    if (!argv || !argv[0] || env_has(envp, "OMP_WAIT_POLICY") || env_has(envp, "GOMP_SPINCOUNT")) return;
    size_t n = 0;
    while (envp && envp[n]) n++;
    char **env2 = malloc((n + 2) * sizeof *env2);
    if (!env2) return;
    for (size_t i = 0; i < n; i++) env2[i] = envp[i];
    env2[n] = "GOMP_SPINCOUNT=10000";
    env2[n + 1] = NULL;
    execve("/proc/self/exe", argv, env2);
    free(env2);
}

static void runtime_env_init(int argc, char **argv, char **envp) {
    (void)argc;
    runtime_env_spin(argv, envp);
    if (!env_has(envp, "MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20);
    if (!env_has(envp, "MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
__attribute__((section(".preinit_array"), used)) static void (*const runtime_env_preinit)(int, char **,
                                                                                          char **) = runtime_env_init;
#endif
