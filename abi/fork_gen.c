/* fork_gen.c: counts the forks this process came from (mlxd__fork_gen, abi/mlxd_error.h), so
 * that an object made before a fork is told apart from the process using it: rings, doorbell
 * records and registered memory are MADV_DONTFORK (not mapped in a child, as with rdma-core's
 * ibv_fork_init), and the parent's objects, file descriptors and event channels must not be
 * driven from the child.  A plain load compared with the generation an object was made in;
 * never a system call. */
#include <pthread.h>

#include "fork_gen.h"

volatile unsigned mlxd__fork_gen;

static void in_child(void)
{
    mlxd__fork_gen++;
}

__attribute__((constructor)) static void fork_gen_init(void)
{
    pthread_atfork(NULL, NULL, in_child);
}
