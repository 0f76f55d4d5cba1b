/* fork_gen.h: the fork generation of this process (abi/fork_gen.c).  Internal. */
#ifndef MLXD_FORK_GEN_H
#define MLXD_FORK_GEN_H

/* Incremented in the child of every fork() (pthread_atfork).  An object records it when made;
 * a different value later means the caller is a child of the process that made it. */
extern volatile unsigned mlxd__fork_gen;

#endif
