/* sysfs.h (private): sysfs helpers shared by discovery and open. */
#ifndef MLXD_SYSFS_H
#define MLXD_SYSFS_H
#include <stddef.h>
/* Reads a small text file, strips trailing newlines; returns its length or -errno. */
int mlxd__read_file(const char *path, char *buf, size_t len);
/* 1 when mlx5_core holds the PCI function of RDMA device name (see sysfs.c), else 0. */
int mlxd__is_mlx5(const char *root, const char *name);
/* N of the uverbsN under <root>/class/infiniband_verbs whose ibdev is name; 0, -ENOENT when
 * none, -errno when the directory cannot be read. */
int mlxd__find_uverbs(const char *root, const char *name, int *index);
#endif
