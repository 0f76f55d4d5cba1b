/* mlx5direct version.  Source of truth for the pkg-config file and the tools' --version. */
#ifndef MLXD_VERSION_H
#define MLXD_VERSION_H
#define MLXD_VERSION_STRING "0.1.0"
/* Returns MLXD_VERSION_STRING of the library actually linked (static storage, never freed). */
const char *mlxd_version(void);
#endif
