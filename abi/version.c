#include "mlxd_version.h"
const char *mlxd_version(void) { return MLXD_VERSION_STRING; }
